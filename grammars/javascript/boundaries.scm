; Where an inline completion at a cursor stops: the end of the innermost unit that contains it.
[
  (expression_statement) (lexical_declaration) (variable_declaration) (return_statement)
  (if_statement) (for_statement) (for_in_statement) (while_statement) (do_statement)
  (try_statement) (switch_statement) (throw_statement) (break_statement)
  (continue_statement) (function_declaration) (generator_function_declaration)
  (class_declaration) (import_statement) (export_statement)
] @statement
[(statement_block) (class_body) (switch_body)] @block
[(arguments) (formal_parameters) (array) (object)] @arguments
