"""infill: code infilling with a masked-diffusion language model.

Subpackages follow the data flow (docs/architecture.md is the map): ``text`` (holes, positions,
files) -> ``engine`` (requests in, results out) -> ``model`` (the seam, networks, tokenizers,
context reuse) and ``decode`` (the denoising loop), guided by ``syntax`` (the general tree-sitter
constraint) with each language's own rules in ``lang/<language>``. ``train``, ``refactor`` and
``bench`` sit on top; ``infill.lsp`` (top-level ``lsp/``) serves editors; ``cli`` is the command line.
"""

__version__ = "0.1.0"
