; Where an inline completion at a cursor stops: the end of the innermost unit that contains it.
[
  (expression_statement) (return_statement) (pass_statement) (break_statement)
  (continue_statement) (raise_statement) (assert_statement) (import_statement)
  (import_from_statement) (global_statement) (nonlocal_statement) (delete_statement)
  (type_alias_statement) (if_statement) (for_statement) (while_statement) (try_statement)
  (with_statement) (match_statement) (function_definition) (class_definition)
  (decorated_definition)
] @statement
(block) @block
[(argument_list) (parameters) (list) (tuple) (dictionary) (set) (subscript)] @arguments
