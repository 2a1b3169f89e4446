; docstrings: functions and classes whose body does not start with a docstring.
; A one-line docstring is inserted before the body's first statement (filter no_docstring
; checks there is none, and that the statement starts its own line).
([(function_definition name: (identifier) @name body: (block . (_) @hole.before))
  (class_definition name: (identifier) @name body: (block . (_) @hole.before))]
 (#set! filter "no_docstring")
 (#set! before "\"\"\"")
 (#set! after "\"\"\"\n{indent}")
 (#set! max_tokens "24"))
