"""``infill lsp``: the command-line entry of the language server.

``add_arguments(parser)`` adds the transport flags; ``main(args)`` runs the server until the
client says ``exit`` (or stdin closes) and returns an exit code. The model flags (``--model``,
``--device``, ``--threads``, ``--precision``) come from infill's CLI when it wires this in; options the client
sends in ``initializationOptions`` override them.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    transport.add_argument("--tcp", metavar="HOST:PORT", help="listen for one client at a time on TCP (host default 127.0.0.1)")
    transport.add_argument("--ws", metavar="HOST:PORT", help="listen on a websocket, for browser-based editors (host default 127.0.0.1)")
    parser.add_argument("--token", help="a secret clients must present (required to bind a non-loopback address)")
    parser.add_argument("--allow-origin", metavar="ORIGIN", action="append", default=[],
                        help="a browser Origin allowed to open the websocket (repeatable; none by default)")
    parser.add_argument("--log-file", metavar="PATH", help="write the server's log here instead of stderr")
    parser.add_argument("--engine", metavar="ws://HOST:PORT",
                        help="use a running `infill serve` instead of loading a model (reconnects on its own)")
    parser.add_argument("--engine-token", metavar="TOKEN", help="the token of the --engine server, if it has one")


def _setup_logging(args: argparse.Namespace) -> None:
    verbose = getattr(args, "verbose", 0) or 0
    handler: logging.Handler = logging.FileHandler(args.log_file) if args.log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    level = logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING
    for name in ("infill.lsp", "infill"):
        logging.getLogger(name).setLevel(level)
    logging.getLogger("infill").addHandler(handler)  # infill.lsp's records reach it too (once)
    pygls = logging.getLogger("pygls")
    pygls.setLevel(logging.DEBUG if verbose > 2 else logging.WARNING)
    pygls.addHandler(handler)


def main(args: argparse.Namespace) -> int:
    from infill.args import engine_settings
    from infill.lsp.server import create_server, load_engine
    from infill.lsp.transport import is_loopback, parse_address, serve_stdio, serve_tcp, serve_ws

    _setup_logging(args)
    address = None
    try:
        if args.tcp or args.ws:
            address = parse_address(args.tcp or args.ws)
    except ValueError as e:
        print(f"infill lsp: error: {args.tcp or args.ws}: {e} (expected HOST:PORT)", file=sys.stderr)
        return 2
    if address and not is_loopback(address[0]) and not args.token:
        print(f"infill lsp: error: binding {address[0]} (not loopback) needs --token", file=sys.stderr)
        return 2
    loader = functools.partial(load_engine, **engine_settings(args))
    holder: dict = {}
    if getattr(args, "engine", None):
        loader = engine_client_loader(args.engine, args.engine_token, holder)
    model = getattr(args, "model", None)
    server = create_server(model=str(model) if model else None, device=getattr(args, "device", None),
                           token=args.token if args.tcp else None, loader=loader)
    if getattr(args, "engine", None):
        holder["server"] = server
        load_model = server.load_model

        async def load_and_remember_the_loop() -> None:  # the engine client reports from its own thread
            import asyncio

            holder["loop"] = asyncio.get_running_loop()
            await load_model()

        server.load_model = load_and_remember_the_loop
    if args.tcp:
        serve_tcp(server, *address)
    elif args.ws:
        serve_ws(server, *address, allowed_origins=set(args.allow_origin), token=args.token)
    else:
        serve_stdio(server)
    return 0


def engine_client_loader(url: str, token: str | None, holder: dict):
    """A loader (model key -> engine) that connects to ``infill serve`` at ``url`` instead of
    loading a model. The editor is told (window/showMessage) when the engine becomes unreachable
    and when it is back; ``holder`` gets the language server ("server") and its event loop ("loop")."""

    def on_status(kind: str, message: str) -> None:
        from lsprotocol import types

        server, loop = holder.get("server"), holder.get("loop")
        if server is None:
            log.warning("%s", message)
            return
        level = types.MessageType.Warning if kind == "down" else types.MessageType.Info
        if loop is not None:
            loop.call_soon_threadsafe(server.show_client, level, message)
        else:
            server.show_client(level, message)

    def load(_key):
        from infill.serve.client import EngineClient

        engine = holder.get("engine")
        if engine is None:
            engine = holder["engine"] = EngineClient(url, token=token, priority="interactive", on_status=on_status)
        return engine

    return load
