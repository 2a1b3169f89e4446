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
    loader = functools.partial(load_engine, precision=getattr(args, "precision", "auto"),
                               threads=getattr(args, "threads", None), cache_mode=getattr(args, "cache_mode", "exact"))
    model = getattr(args, "model", None)
    server = create_server(model=str(model) if model else None, device=getattr(args, "device", None),
                           token=args.token if args.tcp else None, loader=loader)
    if args.tcp:
        serve_tcp(server, *address)
    elif args.ws:
        serve_ws(server, *address, allowed_origins=set(args.allow_origin), token=args.token)
    else:
        serve_stdio(server)
    return 0
