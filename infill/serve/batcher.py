"""Continuous batching: one worker thread runs the Stepper; requests of every client join it.

``submit`` queues a request (a bounded queue: when it is full, :class:`Busy` at once) and returns
its :class:`Ticket`. The worker, between denoising steps, admits queued requests into the running
batch (interactive ones first, then batch work, each in arrival order) while the batch has fewer
than ``max_batch`` requests, then advances every live request one step with one model call
(infill/engine/stepper.py). A request leaves the batch when it finishes, fails, or is cancelled
(``cancel``: before the next step). Its events (drafts, then a result or an error) go to the
ticket's ``emit`` callback, called on the worker thread: it must not block.

``drain(grace_s)`` (SIGTERM): nothing new is accepted, queued requests get a "shutting down"
error, running ones get ``grace_s`` to finish and are then cancelled with that error.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from infill.errors import Cancelled, InfillError, RequestError
from infill.lsp.scheduler import lighten
from infill.protocol import Draft, FillRequest, FillResult

log = logging.getLogger(__name__)

PRIORITY = {"interactive": 0, "batch": 1}


class Busy(InfillError):
    """The queue is full (nothing was queued)."""


class ShuttingDown(InfillError):
    """The server is stopping."""


@dataclass(eq=False)
class Ticket:
    request: FillRequest
    emit: Callable[[str, Any], None]  # ("draft", Draft) | ("result", FillResult) | ("error", Exception)
    priority: int = 0
    draft_every: int = 0
    elastic: bool = False  # lightened by the batch's size when it joins (infill.lsp.scheduler.lighten)
    seq: int = 0
    submitted: float = field(default_factory=time.perf_counter)
    cancelled: threading.Event = field(default_factory=threading.Event)
    finished: bool = False

    def is_set(self) -> bool:  # the stepper's cancel flag
        return self.cancelled.is_set()


class Metrics:
    """What the batcher reports (the server exports it to Prometheus); no-op by default."""

    def queue_depth(self, n: int) -> None: ...
    def live(self, requests: int, rows: int) -> None: ...
    def step(self, seconds: float, requests: int, rows: int) -> None: ...
    def finished(self, outcome: str, seconds: float) -> None: ...


class Batcher:
    def __init__(self, engine, max_batch: int = 32, max_queue: int = 256, metrics: Metrics | None = None):
        from infill.engine.stepper import Stepper

        self.stepper = Stepper(engine)
        self.max_batch, self.max_queue = max_batch, max_queue
        self.metrics = metrics or Metrics()
        self._queue: list[tuple[int, int, Ticket]] = []
        self._seq = itertools.count()
        self._lock = threading.Condition()
        self._running = True
        self._draining = False
        self._slots: dict[int, Ticket] = {}  # slot id -> ticket
        self.steps = 0
        self.rows_stepped = 0  # rows over all model calls (mean batch size = rows_stepped / steps)
        self.requests_stepped = 0
        self._thread = threading.Thread(target=self._run, name="infill-batcher", daemon=True)
        self._thread.start()

    # -- clients' side (any thread) ---------------------------------------------------------

    def submit(self, request: FillRequest, emit: Callable[[str, Any], None], priority: str = "interactive",
               draft_every: int = 0, elastic: bool = False) -> Ticket:
        with self._lock:
            if self._draining or not self._running:
                raise ShuttingDown("the server is shutting down")
            if len(self._queue) >= self.max_queue:
                raise Busy(f"the server is busy: {len(self._queue)} requests are queued (at most {self.max_queue}); try again")
            t = Ticket(request, emit, PRIORITY.get(priority, 0), max(0, draft_every), elastic, next(self._seq))
            heapq.heappush(self._queue, (t.priority, t.seq, t))
            self.metrics.queue_depth(len(self._queue))
            self._lock.notify()
        return t

    def cancel(self, ticket: Ticket) -> None:
        """The ticket's rows leave the batch before the next step (a queued one never joins)."""
        ticket.cancelled.set()
        with self._lock:
            self._lock.notify()

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def live(self) -> int:
        return len(self.stepper.slots)

    @property
    def alive(self) -> bool:
        """The worker thread runs (a health check asks)."""
        return self._thread.is_alive()

    def drain(self, grace_s: float = 5.0) -> None:
        """Stop accepting; queued requests get a shutting-down error; running ones get ``grace_s``
        seconds to finish, then are cancelled with that error; the worker stops."""
        with self._lock:
            self._draining = True
            queued = [t for _, _, t in self._queue]
            self._queue.clear()
            self._lock.notify()
        for t in queued:
            self._finish(t, "error", ShuttingDown("the server is shutting down"))
        end = time.monotonic() + grace_s
        while self.live and time.monotonic() < end and self._thread.is_alive():
            time.sleep(0.01)
        with self._lock:
            self._running = False
            self._lock.notify()
        self._thread.join(timeout=max(1.0, grace_s))

    # -- the worker ---------------------------------------------------------------------------

    def _finish(self, t: Ticket, kind: str, payload: Any) -> None:
        if t.finished:
            return
        t.finished = True
        outcome = kind if kind == "result" else type(payload).__name__.lower()
        self.metrics.finished(outcome, time.perf_counter() - t.submitted)
        try:
            t.emit(kind, payload)
        except Exception:  # noqa: BLE001 -- a client's callback never stops the batch
            log.exception("a result could not be handed over")

    def _admit(self) -> None:
        while len(self.stepper.slots) < self.max_batch:
            with self._lock:
                if not self._queue:
                    break
                _, _, t = heapq.heappop(self._queue)
                self.metrics.queue_depth(len(self._queue))
            if t.is_set():
                self._finish(t, "error", Cancelled("fill cancelled"))
                continue
            on_draft = None
            if t.draft_every:
                def on_draft(d: Draft, t=t) -> None:
                    if not t.finished:
                        t.emit("draft", d)
            request = t.request
            if t.elastic and self.stepper.slots:  # a busy batch: do less (as the language server does)
                engine = self.stepper.engine
                request = lighten(request, len(self.stepper.slots) + 1, engine.default_candidates, engine.default_steps)
            try:
                slot = self.stepper.add(request, cancel=t, on_draft=on_draft, draft_every=t.draft_every)
            except RequestError as e:
                self._finish(t, "error", e)
                continue
            except Exception as e:  # noqa: BLE001
                log.exception("could not start a fill")
                self._finish(t, "error", e)
                continue
            self._slots[slot.id] = t

    def _run(self) -> None:
        while True:
            with self._lock:
                while self._running and not self._queue and not self.stepper.slots:
                    self._lock.wait(timeout=0.5)
                if not self._running:
                    break
            try:
                self._admit()
                if not self.stepper.slots:
                    continue
                t0 = time.perf_counter()
                calls = self.stepper.calls
                done = self.stepper.step()
                if self.stepper.calls > calls:
                    rows = sum(n for _, n in self.stepper.last_call)
                    self.steps += 1
                    self.rows_stepped += rows
                    self.requests_stepped += len(self.stepper.last_call)
                    self.metrics.step(time.perf_counter() - t0, len(self.stepper.last_call), rows)
                for slot in done:
                    t = self._slots.pop(slot.id)
                    if slot.result is not None:
                        self._finish(t, "result", slot.result)
                    else:
                        self._finish(t, "error", slot.error)
                self.metrics.live(len(self.stepper.slots), self.stepper.live_rows)
            except Exception:  # noqa: BLE001 -- the stepper tells each request of its own failures
                log.exception("the batch loop failed; its requests are dropped")
                for slot in list(self.stepper.slots):
                    self.stepper.remove(slot)
                    self._finish(self._slots.pop(slot.id), "error", RuntimeError("the engine failed"))
        # stopped: whatever is still running is cancelled with an error
        for slot in list(self.stepper.slots):
            self.stepper.remove(slot)
            self._finish(self._slots.pop(slot.id), "error", ShuttingDown("the server is shutting down"))
        with self._lock:
            queued = [t for _, _, t in self._queue]
            self._queue.clear()
        for t in queued:
            self._finish(t, "error", ShuttingDown("the server is shutting down"))

