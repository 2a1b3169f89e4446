; Where an inline completion at a cursor stops: the end of the innermost unit that contains it.
[
  (expression_statement) (let_declaration) (function_item) (struct_item) (enum_item)
  (impl_item) (trait_item) (use_declaration) (mod_item) (const_item) (static_item)
  (type_item) (macro_definition)
] @statement
[(block) (declaration_list) (field_declaration_list) (match_block)] @block
[(arguments) (parameters) (array_expression) (tuple_expression)] @arguments
