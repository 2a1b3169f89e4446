; annotate: functions and methods without a return type; the hole goes after the parameters.
((function_declaration name: (identifier) @name parameters: (formal_parameters) @hole.after !return_type)
 (#set! before ": ")
 (#set! max_tokens "8"))
((method_definition name: (property_identifier) @name parameters: (formal_parameters) @hole.after !return_type)
 (#not-eq? @name "constructor")
 (#set! before ": ")
 (#set! max_tokens "8"))
