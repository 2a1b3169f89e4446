; Where brackets and quotes are text, not syntax.
(string) @string
(comment) @comment
