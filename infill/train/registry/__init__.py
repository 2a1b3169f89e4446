"""A many-language training corpus fetched from package registries (``infill corpus fetch``).

Sources, one module each: PyPI sdists (``pypi``), npm tarballs (``npm``) and Debian source
packages for Go, Rust, C, C++ and Java (``debian``). ``http`` is the one network client (the seam
tests replace with a local one), ``package`` the record of one fetched package, ``files`` the
choice of source files inside an archive, ``licences`` the licence reading shared by the sources,
``dedup`` exact and near-duplicate removal, and ``build`` the resumable command that ties them
together and writes ``train.jsonl``, ``valid.jsonl`` and ``manifest.json``.

The Python-only corpus built from installed packages stays in ``infill.train.corpus``; this
package reuses its licence classification, file filters and split.
"""
