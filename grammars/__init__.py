"""Grammar data, installed as ``infill.grammars``: ``languages.toml`` (the one list of languages
infill knows) and each language's tree-sitter queries in ``<lang>/*.scm``. No code: read by
``infill.syntax.languages`` (and, for file extensions, ``infill.train.registry.files``)."""
