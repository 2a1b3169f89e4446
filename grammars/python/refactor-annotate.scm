; annotate: functions without a return annotation; the hole goes between ")" and ":".
((function_definition name: (identifier) @name parameters: (parameters) @hole.after !return_type)
 (#set! before " -> ")
 (#set! max_tokens "8"))
