; Where an inline completion at a cursor stops: the end of the innermost unit that contains it.
[
  (expression_statement) (local_variable_declaration) (return_statement) (if_statement)
  (for_statement) (enhanced_for_statement) (while_statement) (do_statement)
  (try_statement) (switch_expression) (throw_statement) (break_statement)
  (continue_statement) (method_declaration) (constructor_declaration)
  (field_declaration) (class_declaration) (interface_declaration) (import_declaration)
] @statement
[(block) (class_body) (interface_body) (constructor_body) (switch_block)] @block
[(argument_list) (formal_parameters) (array_initializer)] @arguments
