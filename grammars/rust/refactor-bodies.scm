; bodies: functions whose body is only `todo!()` or `unimplemented!()`; the macro is refilled.
((function_item name: (identifier) @name
   body: (block . [(macro_invocation macro: (identifier) @m) (expression_statement (macro_invocation macro: (identifier) @m))] @hole .))
 (#any-of? @m "todo" "unimplemented")
 (#set! max_tokens "64"))
