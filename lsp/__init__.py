"""infill's language server (pygls), installed as ``infill.lsp``: inline completion, completion
and multi-site hole filling.

Modules: ``server`` (handlers), ``options`` (client options), ``documents`` (positions, text
windows, ``<FILL>`` sites), ``scheduler`` (the worker thread, debounce, cancellation, cache),
``rpc`` (JSON-RPC hardening), ``transport`` (stdio, TCP, websocket), ``feedback`` (local
acceptance statistics), ``cli`` (``infill lsp``). It reaches the engine only through
``infill.engine`` and the wire types of ``infill.protocol``.

The folder is the repository's top-level ``lsp/``; it installs under ``infill.lsp`` so that it
never collides with the unrelated PyPI distribution that owns the top-level name ``lsp``.
"""
