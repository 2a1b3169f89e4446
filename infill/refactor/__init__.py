"""Batch refactors: recipes that turn sites in files into holes (recipes), and the command that fills and writes them (run)."""
