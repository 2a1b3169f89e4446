; Where an inline completion at a cursor stops: the end of the innermost unit that contains it.
[
  (expression_statement) (short_var_declaration) (assignment_statement) (return_statement)
  (if_statement) (for_statement) (expression_switch_statement) (type_switch_statement)
  (select_statement) (go_statement) (defer_statement) (var_declaration)
  (const_declaration) (type_declaration) (function_declaration) (method_declaration)
  (inc_statement) (dec_statement) (send_statement) (break_statement)
  (continue_statement) (import_declaration)
] @statement
(block) @block
[(argument_list) (parameter_list) (literal_value)] @arguments
