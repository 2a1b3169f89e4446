"""Each language's own rules, one folder per language, behind the hooks that infill.syntax asks."""
