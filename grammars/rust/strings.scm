; Where brackets and quotes are text, not syntax.
[(string_literal) (raw_string_literal) (char_literal)] @string
[(line_comment) (block_comment)] @comment
