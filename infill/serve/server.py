"""``infill serve``: one engine, many editors, over a websocket (docs/serve-protocol.md).

The websocket speaks infill/serve/protocol.py's messages; the batcher (infill/serve/batcher.py)
denoises every client's requests in one continuous batch. Over plain HTTP on the same port:
``GET /health`` (JSON: model, queue, live requests) and ``GET /metrics`` (Prometheus text:
queue depth, batch size, step time, request latency, outcomes).

Security: binds 127.0.0.1 unless told otherwise, and any other address needs ``--token``; the
token and the Origin header are checked as the language server's websocket checks them
(infill.lsp.transport.check_handshake: a browser Origin must be allowed explicitly). /metrics
needs the token too; /health does not. Frames are at most ``max_frame`` bytes (larger: the
connection is closed with 1009), a connection has at most ``max_in_flight`` requests in flight,
and a client that does not read its results (its send queue full) is disconnected and its
requests cancelled; the others are served on.

SIGTERM or SIGINT: nothing new is accepted, running requests get ``--grace`` seconds to finish,
the rest are cancelled with an error frame, then connections close (1001).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import msgspec

from infill.serve import protocol as wire
from infill.serve.batcher import Batcher, Busy, Metrics, ShuttingDown, Ticket
from infill.errors import Cancelled, RequestError

log = logging.getLogger(__name__)

CONTEXT_CACHE = 131072  # context tokens the engine keeps encoded (--context-cache), all editors' documents
# together: 64 editors' 1k-token documents twice over, about 3 GB for the default model in bf16


@dataclass
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    allowed_origins: set[str] = field(default_factory=set)
    max_batch: int = 32  # requests denoised together
    max_queue: int = 256  # requests waiting to join the batch
    max_in_flight: int = 16  # per connection
    max_frame: int = 4 * 1024 * 1024  # bytes of one incoming frame
    send_queue: int = 256  # frames waiting for a slow client before it is disconnected
    grace_s: float = 5.0  # SIGTERM: how long running requests may finish


class PromMetrics(Metrics):
    def __init__(self):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

        self.registry = r = CollectorRegistry()
        ProcessCollector(registry=r)  # process_resident_memory_bytes and the rest (where the platform has /proc)
        self.q = Gauge("infill_queue_depth", "requests waiting to join the batch", registry=r)
        self.live_requests = Gauge("infill_live_requests", "requests in the running batch", registry=r)
        self.live_rows = Gauge("infill_live_rows", "candidate rows in the running batch", registry=r)
        self.batch_rows = Histogram("infill_batch_rows", "rows per model call", registry=r,
                                    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256))
        self.batch_requests = Histogram("infill_batch_requests", "requests per model call", registry=r,
                                        buckets=(1, 2, 4, 8, 16, 32, 64))
        self.step_s = Histogram("infill_step_seconds", "one denoising step of the whole batch", registry=r,
                                buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5))
        self.latency = Histogram("infill_request_seconds", "submit -> result or error", registry=r,
                                 buckets=(.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
        self.outcomes = Counter("infill_requests", "finished requests by outcome", ["outcome"], registry=r)

    def queue_depth(self, n: int) -> None:
        self.q.set(n)

    def live(self, requests: int, rows: int) -> None:
        self.live_requests.set(requests)
        self.live_rows.set(rows)

    def step(self, seconds: float, requests: int, rows: int) -> None:
        self.step_s.observe(seconds)
        self.batch_rows.observe(rows)
        self.batch_requests.observe(requests)

    def finished(self, outcome: str, seconds: float) -> None:
        self.outcomes.labels(outcome).inc()
        self.latency.observe(seconds)

    def text(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


def error_code(e: Exception) -> str:
    if isinstance(e, Busy):
        return wire.BUSY
    if isinstance(e, Cancelled):
        return wire.CANCELLED
    if isinstance(e, ShuttingDown):
        return wire.SHUTDOWN
    if isinstance(e, RequestError):
        return wire.INVALID
    return wire.ENGINE


class _Connection:
    """One client: its requests in flight and its outgoing frames (a bounded queue)."""

    def __init__(self, server: "InfillServe", ws):
        self.server, self.ws = server, ws
        self.json = False
        self.tickets: dict[int, Ticket] = {}
        self.out: asyncio.Queue = asyncio.Queue()
        self.closed = False

    def send(self, message, droppable: bool = False) -> None:
        """Queue a frame (on the event loop); a client whose queue is full is disconnected."""
        if self.closed:
            return
        limit = self.server.config.send_queue
        if droppable and self.out.qsize() >= limit // 2:
            return  # drafts are the first to go when a client reads slowly
        if self.out.qsize() >= limit:
            log.warning("a client does not read its results; disconnecting it")
            self.abort(wire.SLOW)
            return
        self.out.put_nowait(wire.encode(message, self.json))

    def abort(self, reason: str) -> None:
        self.closed = True
        self.cancel_all()
        self.out.put_nowait(None)
        asyncio.ensure_future(self.ws.close(1008, reason))

    def cancel_all(self) -> None:
        for t in list(self.tickets.values()):
            self.server.batcher.cancel(t)

    def deliver(self, rid: int, holder: list, kind: str, payload) -> None:
        """A batcher event, on the event loop (``holder``: [its ticket], filled once submit returned)."""
        ticket = holder[0] if holder else None
        if kind == "draft":
            self.send(wire.DraftFrame(rid, payload), droppable=True)
            return
        if self.tickets.get(rid) is ticket:
            del self.tickets[rid]
        if kind == "result":
            self.send(wire.Result(rid, payload))
        else:
            self.send(wire.Error(rid, error_code(payload), str(payload)))

    async def sender(self) -> None:
        while True:
            frame = await self.out.get()
            if frame is None:
                return
            await self.ws.send(frame)


class InfillServe:
    """The websocket front. ``batcher`` and ``metrics`` default to a Batcher over ``engine`` and
    its PromMetrics; ``infill serve --ray`` (infill/serve/ray_front.py) passes its own: a dispatcher
    with the Batcher's submit/cancel/queued/live/drain that forwards to Ray Serve replicas, and
    figures with ``text()``. ``engine`` then only names the model (``model_id``, ``model.languages``)."""

    def __init__(self, engine, config: ServeConfig = ServeConfig(), batcher=None, metrics=None):
        self.engine = engine
        self.config = config
        self.metrics = metrics if metrics is not None else PromMetrics()
        self.batcher = batcher if batcher is not None else Batcher(engine, config.max_batch, config.max_queue, self.metrics)
        self.connections: set[_Connection] = set()
        self.started = time.time()
        self._server = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.port: int | None = None

    def hello(self) -> wire.Hello:
        languages = getattr(self.engine.model, "languages", None)
        c = self.config
        return wire.Hello(wire.VERSION, self.engine.model_id, list(languages) if languages else None,
                          c.max_batch, c.max_queue, c.max_in_flight, c.max_frame)

    # -- HTTP ---------------------------------------------------------------------------------

    def process_request(self, connection, request):
        from infill.lsp.transport import check_handshake

        path = urlsplit(request.path).path
        if path == "/health":
            body = {"status": "ok", "model": self.engine.model_id, "queued": self.batcher.queued,
                    "live": self.batcher.live, "connections": len(self.connections),
                    "uptime_s": round(time.time() - self.started, 1)}
            response = connection.respond(200, json.dumps(body) + "\n")
            response.headers["Content-Type"] = "application/json"
            return response
        refusal = check_handshake(request.path, request.headers, self.config.allowed_origins, self.config.token)
        if refusal is not None:
            log.warning("refused a client: %s", refusal[1])
            return connection.respond(refusal[0], refusal[1] + "\n")
        if path == "/metrics":
            response = connection.respond(200, self.metrics.text().decode())
            response.headers["Content-Type"] = "text/plain; version=0.0.4; charset=utf-8"
            return response
        return None

    # -- the websocket ------------------------------------------------------------------------

    async def handler(self, ws) -> None:
        conn = _Connection(self, ws)
        self.connections.add(conn)
        sender = asyncio.ensure_future(conn.sender())
        conn.send(self.hello())
        try:
            async for frame in ws:
                if conn.closed:
                    break
                self.on_frame(conn, frame)
        except Exception as e:  # noqa: BLE001 -- a broken connection is its own business
            log.info("a client went away: %s", e)
        finally:
            conn.closed = True
            conn.cancel_all()
            conn.out.put_nowait(None)
            self.connections.discard(conn)
            try:
                await asyncio.wait_for(sender, timeout=1.0)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001
                sender.cancel()

    def on_frame(self, conn: _Connection, frame) -> None:
        try:
            msg = wire.decode_client(frame)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            conn.json = isinstance(frame, str)
            conn.send(wire.Error(None, wire.BAD_FRAME, f"not a message of infill's serve protocol: {e}"))
            return
        conn.json = isinstance(frame, str)
        if msg.v != wire.VERSION:
            conn.send(wire.Error(msg.id, wire.BAD_VERSION, f"protocol version {msg.v} is not served (this is {wire.VERSION})"))
            return
        if isinstance(msg, wire.Cancel):
            t = conn.tickets.get(msg.id)
            if t is not None:
                self.batcher.cancel(t)
            return
        if msg.id in conn.tickets:
            conn.send(wire.Error(msg.id, wire.DUPLICATE, f"request {msg.id} is still in flight"))
            return
        if len(conn.tickets) >= self.config.max_in_flight:
            conn.send(wire.Error(msg.id, wire.TOO_MANY,
                                 f"{len(conn.tickets)} requests in flight on this connection (at most {self.config.max_in_flight})"))
            return
        loop = asyncio.get_running_loop()
        holder: list[Ticket] = []

        def emit(kind, payload, rid=msg.id):
            try:
                loop.call_soon_threadsafe(conn.deliver, rid, holder, kind, payload)
            except RuntimeError:  # the loop is closed: the server is gone
                pass

        try:
            t = self.batcher.submit(msg.request, emit, msg.priority, msg.drafts, msg.elastic)
        except Busy as e:
            conn.send(wire.Error(msg.id, wire.BUSY, str(e)))
            return
        except ShuttingDown as e:
            conn.send(wire.Error(msg.id, wire.SHUTDOWN, str(e)))
            return
        holder.append(t)
        conn.tickets[msg.id] = t

    # -- running ------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event, ready: threading.Event | None = None) -> None:
        from websockets.asyncio.server import serve

        self.loop = asyncio.get_running_loop()
        c = self.config
        async with serve(self.handler, c.host, c.port, process_request=self.process_request, max_size=c.max_frame,
                         close_timeout=2, compression=None) as srv:
            self._server = srv
            self.port = next(iter(srv.sockets)).getsockname()[1]
            log.info("infill serve: %s on ws://%s:%d", self.engine.model_id, c.host, self.port)
            if ready is not None:
                ready.set()
            await stop.wait()
            log.info("stopping: %d running, %d queued", self.batcher.live, self.batcher.queued)
            await asyncio.to_thread(self.batcher.drain, c.grace_s)
            # let the error frames go out, then close every connection
            end = time.monotonic() + 2.0
            while any(not conn.out.empty() for conn in self.connections) and time.monotonic() < end:
                await asyncio.sleep(0.02)
            srv.close(close_connections=True)
            await srv.wait_closed()


class ServerThread:
    """An InfillServe on its own thread and event loop (tests, benchmarks); ``serve``: an already
    built front (anything with InfillServe's ``run(stop, ready)``, ``config`` and ``port``)."""

    def __init__(self, engine, config: ServeConfig | None = None, serve=None):
        self.serve = serve if serve is not None else InfillServe(engine, config or ServeConfig(port=0))
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._main, name="infill-serve", daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the server did not start")

    def _main(self) -> None:
        async def main():
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            await self.serve.run(self._stop, self._ready)

        asyncio.run(main())

    @property
    def url(self) -> str:
        return f"ws://{self.serve.config.host}:{self.serve.port}"

    def stop(self, timeout: float = 30) -> None:
        if self._loop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)


# -- the command --------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; any other needs --token)")
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    parser.add_argument("--token", help="a secret clients must present (?token=... or Authorization: Bearer ...)")
    parser.add_argument("--allow-origin", metavar="ORIGIN", action="append", default=[],
                        help="a browser Origin allowed to connect (repeatable; none by default)")
    parser.add_argument("--max-batch", type=int, default=32, help="requests denoised together (default 32)")
    parser.add_argument("--max-queue", type=int, default=256, help="requests waiting; more get a busy error (default 256)")
    parser.add_argument("--max-in-flight", type=int, default=16, help="requests in flight per connection (default 16)")
    parser.add_argument("--max-frame", type=int, default=4 * 1024 * 1024, help="largest frame in bytes (default 4 MiB)")
    parser.add_argument("--grace", type=float, default=5.0, help="seconds running requests may finish on SIGTERM (default 5)")
    parser.set_defaults(context_cache=CONTEXT_CACHE)


def main(args: argparse.Namespace) -> int:
    from infill.args import load_engine
    from infill.lsp.transport import is_loopback

    if not is_loopback(args.host) and not args.token:
        print(f"infill serve: error: binding {args.host} (not loopback) needs --token", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO if getattr(args, "verbose", 0) else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log.setLevel(logging.INFO)
    engine = load_engine(args)
    config = config_from_args(args)
    server = InfillServe(engine, config)
    run_until_signalled(server, lambda: f"infill serve: {engine.model_id} on ws://{config.host}:{server.port}")
    return 0


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    return ServeConfig(args.host, args.port, args.token, set(args.allow_origin), args.max_batch, args.max_queue,
                       args.max_in_flight, args.max_frame, grace_s=args.grace)


def run_until_signalled(front, banner) -> None:
    """Serve ``front`` (an InfillServe, or anything with its ``run(stop, ready)``) until SIGTERM or
    SIGINT; once it listens, print ``banner()`` on stderr (the line benchmarks and tests wait for)."""

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        ready = threading.Event()
        task = asyncio.ensure_future(front.run(stop, ready))
        while not ready.is_set() and not task.done():
            await asyncio.sleep(0.01)
        if ready.is_set():
            print(banner(), file=sys.stderr, flush=True)
        await task

    asyncio.run(run())
