"""How the server talks to an editor: stdio (the default), TCP, or a websocket.

TCP and websocket servers bind 127.0.0.1 unless told otherwise; binding anything that is not a
loopback address needs a token. A websocket client presents it as ``?token=...`` or an
``Authorization: Bearer ...`` header; a TCP client as ``initializationOptions.token``. The
websocket server also checks the ``Origin`` header: a missing Origin (a native client) is
allowed, a browser's only if it is in the allow-list, so a web page cannot talk to the server.

Over TCP and websockets one client is served at a time, and a client that goes away without
``exit`` leaves the server listening for the next one (its fills are cancelled).

Over stdio and TCP, messages are read by ``framing.run_framed`` (a bounded ``Content-Length``,
resynchronisation after a malformed header) instead of pygls' ``run_async``.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import sys
import threading
from urllib.parse import parse_qs, urlsplit

from pygls.io_ import StdoutWriter, run_websocket

from infill.lsp.framing import run_framed, stdin_reader

log = logging.getLogger(__name__)

WS_MAX_MESSAGE = 64 * 1024 * 1024  # a whole document travels in one message


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_address(spec: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``PORT`` (host 127.0.0.1) -> (host, port); ValueError otherwise."""
    host, sep, port_s = spec.rpartition(":")
    if not sep:
        host, port_s = "127.0.0.1", spec
    host = host.strip("[]") or "127.0.0.1"
    port = int(port_s)
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is out of range")
    return host, port


def _end_session(server) -> None:
    server.scheduler.cancel_all()
    server.protocol.reset()


def _run_until_stopped(server, main) -> None:
    """Run the coroutine function ``main`` until it ends or Ctrl-C, then stop the server's worker."""
    try:
        asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    finally:
        server.scheduler.shutdown()


def serve_stdio(server, stdin=None, stdout=None) -> None:
    """pygls' ``start_io`` with our frame reader (pygls' reads unbounded, and never resynchronises)."""
    server._stop_event = stop = threading.Event()  # pygls' shutdown() sets it
    server.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
    read = stdin_reader(stdin or sys.stdin.buffer, server.thread_pool)
    try:
        asyncio.run(run_framed(stop, read, server.protocol, logger=log, error_handler=server.report_server_error))
    except BrokenPipeError:
        log.error("the connection to the client is lost; shutting down")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
        server.scheduler.shutdown()


def serve_tcp(server, host: str, port: int, ready: threading.Event | None = None) -> None:
    busy = asyncio.Lock()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if busy.locked():
            log.warning("refusing a second client while one is connected")
            writer.close()
            return
        async with busy:
            log.info("client connected")
            server.protocol.set_writer(writer)
            try:
                await run_framed(threading.Event(), reader.read, server.protocol,
                                 logger=log, error_handler=server.report_server_error)
            except (ConnectionError, asyncio.IncompleteReadError) as e:
                log.info("client went away: %s", e)
            finally:
                _end_session(server)
                writer.close()
            log.info("client disconnected; listening for the next one")

    async def main() -> None:
        srv = await asyncio.start_server(connection, host, port, limit=2**16)
        log.info("serving LSP over TCP on %s", ", ".join(str(s.getsockname()) for s in srv.sockets))
        if ready is not None:
            ready.set()
        async with srv:
            await srv.serve_forever()

    _run_until_stopped(server, main)


def check_handshake(path: str, headers, allowed_origins: set[str], token: str | None) -> tuple[int, str] | None:
    """(status, reason) to refuse a websocket handshake, or None to accept it."""
    origin = headers.get("Origin")
    if origin is not None and origin not in allowed_origins:
        return 403, f"origin {origin!r} is not allowed (see --allow-origin)"
    if token is not None:
        given = parse_qs(urlsplit(path).query).get("token", [None])[0]
        auth = headers.get("Authorization") or ""
        if auth.startswith("Bearer "):
            given = auth[len("Bearer "):]
        if not isinstance(given, str) or not hmac.compare_digest(given, token):
            return 401, "a valid token is required"
    return None


def serve_ws(server, host: str, port: int, allowed_origins: set[str], token: str | None,
             ready: threading.Event | None = None) -> None:
    from websockets.asyncio.server import serve  # pip install pygls[ws]

    busy = asyncio.Lock()

    def process_request(connection, request):
        refusal = check_handshake(request.path, request.headers, allowed_origins, token)
        if refusal is not None:
            log.warning("refused a websocket client: %s", refusal[1])
            return connection.respond(refusal[0], refusal[1] + "\n")
        if busy.locked():
            return connection.respond(409, "another client is connected\n")
        return None

    async def connection(websocket) -> None:
        async with busy:
            stop = threading.Event()
            try:
                await run_websocket(stop_event=stop, websocket=websocket, protocol=server.protocol,
                                    logger=log, error_handler=server.report_server_error)
            finally:
                _end_session(server)

    async def main() -> None:
        async with serve(connection, host, port, process_request=process_request, max_size=WS_MAX_MESSAGE) as srv:
            log.info("serving LSP over websocket on %s", ", ".join(str(s.getsockname()) for s in srv.sockets))
            if ready is not None:
                ready.set()
            await srv.serve_forever()

    _run_until_stopped(server, main)
