; Where brackets and quotes are text, not syntax.
[(string_literal) (char_literal) (system_lib_string)] @string
(comment) @comment
