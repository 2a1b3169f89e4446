"""The engine client: a running ``infill serve`` used in place of a local Engine.

:class:`EngineClient` has the Engine's ``fill``/``fill_batch`` signatures (a cancel flag polled
between sends, ``on_draft`` for streamed drafts), so ``infill lsp --engine ws://HOST:PORT`` and
``infill refactor --engine ws://...`` use it without loading a model. One connection, on a
background thread with its own event loop; when it drops (or cannot be opened) it is opened again
with exponential backoff (0.25 s doubling up to 10 s), requests in flight fail with
:class:`EngineUnavailable`, and ``on_status(kind, message)`` says so once per outage ("down")
and again when the engine is back ("up"): the language server shows both to the editor.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from concurrent.futures import Future, wait
from types import SimpleNamespace
from typing import Callable
from urllib.parse import urlsplit

from infill.errors import Cancelled, InfillError, RequestError
from infill.protocol import Draft, FillRequest, FillResult
from infill.serve import protocol as wire

log = logging.getLogger(__name__)

BACKOFF_START_S = 0.25
BACKOFF_MAX_S = 10.0


class EngineUnavailable(InfillError):
    """The engine server cannot be reached (the client keeps trying in the background)."""


class EngineBusy(InfillError):
    """The engine server's queue is full."""


class EngineClient:
    def __init__(self, url: str, token: str | None = None, priority: str = "interactive",
                 on_status: Callable[[str, str], None] | None = None, connect_timeout_s: float = 5.0,
                 backoff_max_s: float = BACKOFF_MAX_S):
        parts = urlsplit(url)
        if parts.scheme not in ("ws", "wss") or not parts.hostname:
            raise ValueError(f"{url}: expected ws://HOST:PORT")
        self.url, self.token, self.priority = url, token, priority
        self.elastic = priority == "interactive"  # keystroke fills may do less in a busy batch, as in-process ones do
        self.on_status = on_status
        self.backoff_max_s = backoff_max_s
        self.model_id = "(engine server)"
        self.device = url
        self.model = SimpleNamespace(languages=None)  # what the language server asks of an engine's model
        self.hello: wire.Hello | None = None
        self.connected = threading.Event()
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[Future, Callable[[Draft], None] | None]] = {}
        self._ws = None
        self._down_said = False
        self._closing = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="infill-engine-client", daemon=True)
        self._thread.start()
        self._task = asyncio.run_coroutine_threadsafe(self._connect_forever(), self._loop)
        self.connected.wait(connect_timeout_s)

    # -- the Engine's interface ----------------------------------------------------------------

    def fill(self, request: FillRequest, cancel=None, on_draft: Callable[[Draft], None] | None = None,
             constraint=None) -> FillResult:
        return self.fill_batch([request], cancel=cancel, on_draft=on_draft, constraint=constraint)[0]

    def fill_batch(self, requests: list[FillRequest], cancel=None, on_draft: Callable[[Draft], None] | None = None,
                   constraint=None, drafts: int = 4) -> list[FillResult]:
        """Results in request order. Raises Cancelled (``cancel`` set: the server is told),
        EngineUnavailable, EngineBusy or RequestError."""
        if constraint is not None:
            raise RequestError("a custom constraint cannot travel to an engine server")
        if not self.connected.is_set():
            raise EngineUnavailable(f"the engine at {self.url} is unreachable (retrying in the background)")
        ids, futures = [], []
        for i, r in enumerate(requests):
            rid = next(self._ids)
            fut: Future = Future()
            self._pending[rid] = (fut, on_draft if i == 0 else None)
            msg = wire.Fill(rid, r, self.priority, drafts if (on_draft is not None and i == 0) else 0,
                            elastic=self.elastic)
            asyncio.run_coroutine_threadsafe(self._send(msg, rid), self._loop)
            ids.append(rid)
            futures.append(fut)
        try:
            while True:
                if not wait(futures, timeout=0.005 if cancel is not None else 0.5)[1]:
                    break
                if cancel is not None and cancel.is_set():
                    for rid, f in zip(ids, futures):
                        if not f.done():
                            asyncio.run_coroutine_threadsafe(self._send(wire.Cancel(rid), None), self._loop)
                    raise Cancelled("fill cancelled")
            return [f.result() for f in futures]
        finally:
            for rid in ids:
                self._pending.pop(rid, None)

    def default_steps(self, slots: int) -> int:  # the scheduler's lighten() asks; the server decides
        return max(1, -(-slots // 2))

    def close(self) -> None:
        """Close the connection with a normal closing handshake (the server logs a client that left,
        not an error), then stop the background loop."""
        self._closing = True
        if self._ws is not None:
            try:
                asyncio.run_coroutine_threadsafe(self._ws.close(), self._loop).result(2)
            except Exception:  # noqa: BLE001 -- closing what is already gone
                pass
        self._task.cancel()
        time.sleep(0.05)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(2)

    # -- the connection -----------------------------------------------------------------------

    def _status(self, kind: str, message: str) -> None:
        (log.warning if kind == "down" else log.info)("%s", message)
        if self.on_status is not None:
            try:
                self.on_status(kind, message)
            except Exception:  # noqa: BLE001
                log.exception("on_status failed")

    async def _send(self, msg, rid: int | None) -> None:
        ws = self._ws
        try:
            if ws is None:
                raise ConnectionError("not connected")
            await ws.send(wire.encode(msg))
        except Exception as e:  # noqa: BLE001
            if rid is not None:
                self._fail(rid, EngineUnavailable(f"the engine at {self.url} is unreachable: {e}"))

    def _fail(self, rid: int, error: Exception) -> None:
        entry = self._pending.get(rid)
        if entry is not None and not entry[0].done():
            entry[0].set_exception(error)

    async def _connect_forever(self) -> None:
        from websockets.asyncio.client import connect

        delay = BACKOFF_START_S
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        while not self._closing:
            try:
                async with connect(self.url, additional_headers=headers, max_size=64 * 1024 * 1024,
                                   open_timeout=5, close_timeout=1, compression=None) as ws:
                    hello = wire.decode_server(await asyncio.wait_for(ws.recv(), 5))
                    if not isinstance(hello, wire.Hello) or hello.version != wire.VERSION:
                        raise ConnectionError(f"not an infill engine server of protocol {wire.VERSION}")
                    self.hello, self.model_id = hello, hello.model
                    self.model.languages = tuple(hello.languages) if hello.languages else None
                    self._ws = ws
                    delay = BACKOFF_START_S
                    if self._down_said:  # said before `connected` is set: a waiter sees both
                        self._status("up", f"the engine at {self.url} is reachable again ({hello.model})")
                        self._down_said = False
                    else:
                        log.info("connected to the engine at %s (%s)", self.url, hello.model)
                    self.connected.set()
                    async for frame in ws:
                        self._on_frame(frame)
                    raise ConnectionError("the server closed the connection")
            except asyncio.CancelledError:
                break
            except Exception as e:  # noqa: BLE001 -- anything: retry with backoff
                self._ws = None
                self.connected.clear()
                for rid in list(self._pending):
                    self._fail(rid, EngineUnavailable(f"the connection to the engine at {self.url} was lost"))
                if not self._down_said and not self._closing:
                    self._status("down", f"the engine at {self.url} is unreachable ({e}); retrying")
                    self._down_said = True
                await asyncio.sleep(delay)
                delay = min(self.backoff_max_s, delay * 2)

    def _on_frame(self, frame) -> None:
        try:
            msg = wire.decode_server(frame)
        except Exception:  # noqa: BLE001
            log.warning("an unreadable frame from the engine server")
            return
        if isinstance(msg, wire.Result):
            entry = self._pending.get(msg.id)
            if entry is not None and not entry[0].done():
                entry[0].set_result(msg.result)
        elif isinstance(msg, wire.DraftFrame):
            entry = self._pending.get(msg.id)
            if entry is not None and entry[1] is not None:
                try:
                    entry[1](msg.draft)
                except Exception:  # noqa: BLE001
                    log.exception("on_draft failed")
        elif isinstance(msg, wire.Error):
            if msg.id is None:
                log.warning("engine server: %s: %s", msg.code, msg.message)
                return
            error: Exception
            if msg.code == wire.CANCELLED:
                error = Cancelled(msg.message)
            elif msg.code == wire.BUSY or msg.code == wire.TOO_MANY:
                error = EngineBusy(msg.message)
            elif msg.code == wire.INVALID:
                error = RequestError(msg.message)
            elif msg.code == wire.SHUTDOWN:
                error = EngineUnavailable(msg.message)
            else:
                error = InfillError(f"engine server: {msg.message}")
            self._fail(msg.id, error)
