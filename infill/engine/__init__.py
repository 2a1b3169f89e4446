"""The engine: FillRequest in, FillResult out (fill); candidate finishing such as loop cuts (repeats)."""
