"""infill's language server (pygls): inline completion, completion and multi-site hole filling.

Modules: ``server`` (handlers), ``options`` (client options), ``documents`` (positions, text
windows, ``<FILL>`` sites), ``scheduler`` (the worker thread, debounce, cancellation, cache),
``rpc`` (JSON-RPC hardening), ``transport`` (stdio, TCP, websocket), ``feedback`` (local
acceptance statistics), ``cli`` (``infill lsp``).

Named ``infill_lsp`` rather than ``lsp``: an unrelated PyPI distribution ``lsp`` installs a
top-level ``lsp`` package.
"""
