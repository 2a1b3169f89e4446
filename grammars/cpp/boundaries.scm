; Where an inline completion at a cursor stops: the end of the innermost unit that contains it.
[
  (expression_statement) (declaration) (return_statement) (if_statement)
  (for_statement) (for_range_loop) (while_statement) (do_statement)
  (switch_statement) (break_statement) (continue_statement) (function_definition)
  (type_definition) (template_declaration) (namespace_definition) (using_declaration)
  (alias_declaration) (field_declaration) (preproc_include) (preproc_def)
] @statement
[(compound_statement) (field_declaration_list) (declaration_list) (enumerator_list)] @block
[(argument_list) (parameter_list) (initializer_list)] @arguments
