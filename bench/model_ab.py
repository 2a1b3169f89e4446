"""Two model directories fed the same keystrokes in one process: the language server's cursor
requests (bench lsp's typing: keystrokes re-typing a line of a real file at random spots, the
line's rest removed; a 32-token window, each model's own score floor), in alternating order,
compared fill by fill (a shared machine drifts by more than the difference between two runs).
The first keystroke at a spot (a new context to encode) is run but not counted. For a window
adapter's cost: the default model against the same network with its adapter.

    .venv/bin/python bench/model_ab.py --before /tmp/plain_model --now infill/model/default_model --seed 801
"""

from __future__ import annotations

import argparse
from pathlib import Path

from decode_path_ab import paired, report, typing, typing_arguments

from infill.engine.fill import Engine, EngineConfig
from infill.model.declared import declared_min_score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="a model directory")
    parser.add_argument("--now", type=Path, required=True, help="another model directory")
    typing_arguments(parser, seed=801)
    args = parser.parse_args()
    now = Engine.load(EngineConfig(model_dir=args.now, threads=2))
    before = Engine.load(EngineConfig(model_dir=args.before, threads=2))
    floor = declared_min_score(args.now)  # one floor for both: the same requests, so a pair is the same work
    pairs = paired(now, before, typing(open(args.file).read(), args.spots, args.keys, args.seed, floor))
    report(pairs, f"keystrokes 2..{args.keys} at {args.spots} spots of {args.file}, seed {args.seed}; "
                  f"before {args.before}, now {args.now}")


if __name__ == "__main__":
    main()
