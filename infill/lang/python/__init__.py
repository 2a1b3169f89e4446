"""Python's own rules: the offside rule's shapes (shape), nested-header scaffolds (scaffold), CPython compile checks (pycompile)."""
