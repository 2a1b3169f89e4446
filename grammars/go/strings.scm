; Where brackets and quotes are text, not syntax.
[(interpreted_string_literal) (raw_string_literal) (rune_literal)] @string
(comment) @comment
