; Where brackets and quotes are text, not syntax.
[(string) (template_string) (regex)] @string
(comment) @comment
