; bodies: functions whose body is only `pass`, `...` or `raise NotImplementedError[(...)]`
; (a docstring and comments may come with it). The stub statement is refilled. Filter
; stub_body checks nothing else is in the body and skips @overload / @abstractmethod
; functions and .pyi stub files.
((function_definition name: (identifier) @name
   body: (block [(pass_statement) (expression_statement (ellipsis))] @hole))
 (#set! filter "stub_body")
 (#set! max_tokens "64"))
((function_definition name: (identifier) @name
   body: (block (raise_statement [(identifier) @exc (call function: (identifier) @exc)]) @hole))
 (#eq? @exc "NotImplementedError")
 (#set! filter "stub_body")
 (#set! max_tokens "64"))
