; Where brackets and quotes are text, not syntax.
[(string_literal) (character_literal)] @string
[(line_comment) (block_comment)] @comment
