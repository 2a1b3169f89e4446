"""The worker: one thread owns the engine; the event loop never runs the model.

Every fill is keyed (per document, per kind of request). A newer fill with the same key sets the
previous one's cancel flag, so its denoising stops between steps, or it never starts if it is
still waiting for the worker or its debounce. Finished fills go into a small LRU cache keyed on
the text around the cursor. The model is loaded in the worker, in the background from
``initialize`` (and again when the model options change); a fill that arrives during the load
waits in the queue and runs as soon as the load ends. After a load the worker runs one small
warm-up fill (the engine's first fill pays one-time costs: grammars, first kernels), unless a fill
is already waiting, and stops it between steps as soon as one arrives.

Fills are batched: a fill joins a queue of pending jobs, and whenever the worker gets to it, it
takes every pending job (at most ``max_batch``; cancelled ones are dropped) and runs them
through one ``Engine.fill_batch``, so several documents typing at once share one denoising pass
instead of waiting for each other. Documents typing at once get their answers at once, so
before a batch the worker waits a moment (at most ``batch_wait_s``) until every document
answered in the last second has sent its next fill; otherwise the first to send would run alone
and the rest behind it. A lone typist never waits.

Under load, cursor fills give up quality for latency: in a batch of n jobs, each "elastic" job
(inline completion and completion, not Fill holes) does about 1/min(n, 4) of its usual work
(:func:`lighten`: fewer candidates, then fewer denoising steps), so eight documents typing at
once cost a batch about twice one document's fill instead of eight times.

A batch stops between steps only when every job in it is cancelled; a job cancelled while its
batch runs gets Cancelled instead of its result. If the batch fails with an InfillError (a
request the engine rejects), its jobs are retried one by one, so a bad request fails only itself.

While a document is typed in at the end of a long prefix, the prefix's start moves every so
often (``Engine.prepare``'s sticky start), and the fill that moves it encodes its whole context
again: seconds on a CPU. So once the worker has been idle for ``AHEAD_IDLE_S`` after a cursor
fill, it encodes that context ahead where typing is about to move the start
(``Engine.encode_ahead``), a chunk at a time, and stops as soon as a fill is asked for: a pause
in typing pays for the keystroke that would have stalled.

A fill may ask for drafts (``on_draft``: lsp/drafts.py): the engine streams those of its batch's
first request only, so a job whose awaiters want drafts goes first in its batch (of several such
jobs in one batch, the oldest gets them). Drafts reach ``on_draft`` on the event loop through a
:class:`~infill.lsp.drafts.Relay`, never once the fill is cancelled, and never after ``fill``
returned or raised.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable

import msgspec

from infill.errors import Cancelled, InfillError, ModelLoadError
from infill.protocol import Draft, FillRequest, FillResult

from infill.lsp.drafts import Relay

log = logging.getLogger(__name__)

CACHE_SIZE = 64
MAX_BATCH = 16  # fill jobs run through one fill_batch call, at most
BATCH_WAIT_S = 0.015  # how long a batch waits for the next fills of recently answered documents
RECENT_S = 1.0  # a document answered this recently counts as typing
MAX_SHED = 4  # under load an elastic fill does at least 1/MAX_SHED of its usual work
AHEAD_IDLE_S = 0.5  # the worker encodes a context ahead once no fill was asked for this long (a pause, not the gap
# between keystrokes: typed 400 ms apart at 0.3, each gap ran a chunk that the next keystroke waited for)


def _awaitable(future: Future) -> asyncio.Future:
    """``future`` for the event loop, its outcome always retrieved: a request cancelled while it
    waits (``$/cancelRequest``) leaves the shielded job to end in Cancelled, which would otherwise be
    logged as an error nobody retrieved."""
    waiter = asyncio.wrap_future(future)
    waiter.add_done_callback(lambda f: f.cancelled() or f.exception())
    return waiter


def lighten(request: FillRequest, batch: int, candidates: int, default_steps: Callable[[int], int]) -> FillRequest:
    """``request`` with about 1/min(batch, MAX_SHED) of its usual work (a pure function).

    ``candidates`` is the engine's default; ``default_steps(slots)`` is the engine's step rule
    (``Engine.default_steps``: the steps it runs for that many hole slots when a request sets none).
    Candidates go first (one full-length candidate keeps most of the quality), then steps: each
    step commits more tokens (a causal model's fill, one token or more a step, ends sooner). A
    threshold schedule sets its own steps, so it only loses candidates.
    """
    factor = min(batch, MAX_SHED)
    if factor <= 1:
        return request
    o = request.options
    cands = o.candidates or candidates
    fewer = max(1, cands // factor)
    rest = factor * fewer / cands  # what is left to shed once candidates are cut
    steps = o.steps
    if rest > 1 and o.threshold is None:
        usual = o.steps or default_steps(sum(h.max_tokens for h in request.holes))
        steps = max(1, math.ceil(usual / rest))
    if (fewer, steps) == (cands, o.steps):
        return request
    return msgspec.structs.replace(request, options=msgspec.structs.replace(o, candidates=fewer, steps=steps))


class LRU:
    """A tiny least-recently-used map."""

    def __init__(self, size: int = CACHE_SIZE):
        self.size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable) -> Any | None:
        if key not in self._items:
            return None
        self._items.move_to_end(key)
        return self._items[key]

    def put(self, key: Hashable, value: Any) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()


@dataclass
class _Job:
    """One fill waiting for (or running in) the worker."""

    key: Hashable
    request: FillRequest
    flag: "_AllSet"  # cancelled once every awaiter's flag is set (requests sharing it add theirs)
    elastic: bool = False  # may do less work when it shares a batch (see lighten)
    future: Future = field(default_factory=Future)
    queued_at: float = field(default_factory=time.monotonic)
    relays: list[Relay] = field(default_factory=list)  # its awaiters' drafts (requests sharing it add theirs)
    draft_every: int = 1  # a draft every this many denoising steps (its first awaiter's)

    @property
    def drafting(self) -> bool:
        """Whether an awaiter still wants this job's drafts."""
        return any(r.live for r in self.relays)

    def draft(self, draft: Draft) -> None:
        """The engine's on_draft (in the worker): ``draft`` to every awaiter's relay."""
        for relay in list(self.relays):
            relay.push(draft)


class _AllSet:
    """A cancel flag for a batch: set once every job's flag is set."""

    def __init__(self, flags: list):
        self.flags = flags

    def is_set(self) -> bool:
        return all(f.is_set() for f in self.flags)


class _PendingFill:
    """A cancel flag for the warm-up: set once a real fill is waiting."""

    def __init__(self, scheduler: "Scheduler"):
        self.scheduler = scheduler

    def is_set(self) -> bool:
        return bool(self.scheduler._pending)


class _Asked:
    """A stop flag for encoding ahead: set once a fill is waiting, or was asked for after ``since``
    (it may still be in its debounce)."""

    def __init__(self, scheduler: "Scheduler", since: float):
        self.scheduler, self.since = scheduler, since

    def is_set(self) -> bool:
        return bool(self.scheduler._pending) or self.scheduler._asked_at > self.since


class Scheduler:
    """Runs engine loads and (batched) fills on a single worker thread."""

    def __init__(self, loader: Callable[[Any], Any], max_batch: int = MAX_BATCH, batch_wait_s: float = BATCH_WAIT_S,
                 warmup: Callable[[Any, Any], Any] | None = None):
        self._loader = loader  # model key -> Engine (runs in the worker; imports torch)
        self._warmup = warmup  # (engine, cancel flag) -> anything: one small fill after a load
        self._warmed: Any = None  # the model key last warmed up
        self.load_done_at: float | None = None  # time.monotonic() when the last load ended (for logs and tests)
        self._first_since_load = True  # the next batch is the first since a load (its delay is logged)
        self.max_batch = max(1, max_batch)
        self.batch_wait_s = batch_wait_s
        self._answered: dict[Hashable, float] = {}  # fill key -> when its last job was answered
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="infill-engine")
        self._engine: Any = None
        self._engine_key: Any = None
        self._load_error: Exception | None = None
        self._loading: Future | None = None
        self._flags: dict[Hashable, threading.Event] = {}
        self._pending: list[_Job] = []  # fills waiting for the worker, oldest first
        self._inflight: dict[Hashable, _Job] = {}  # full cache key -> the job filling it (shared by equal requests)
        self._queued = threading.Condition()  # guards _pending (the event loop appends, the worker takes)
        self._drain_queued = False  # a _run_pending is waiting in the executor
        self._asked_at = 0.0  # time.monotonic() when a fill was last asked for
        self._ahead: FillRequest | None = None  # the latest cursor fill's request, while an _encode_ahead is queued
        self.cache = LRU()

    # -- the model ------------------------------------------------------------------------

    def load(self, key: Any) -> Future:
        """Load the engine for ``key`` in the worker (a no-op if it is already loaded), then warm it up."""
        self._loading = self._executor.submit(self._load, key)
        if self._warmup is not None:
            self._executor.submit(self._warm_up, key)
        return self._loading

    def _load(self, key: Any) -> Any:
        if self._engine is not None and self._engine_key == key:
            return self._engine
        self._engine, self._engine_key, self._load_error = None, key, None
        self._first_since_load = True
        self.cache.clear()
        try:
            self._engine = self._loader(key)
        except Exception as e:  # noqa: BLE001 - reported on every fill until the options change
            self._load_error = e
            raise
        finally:
            self.load_done_at = time.monotonic()
        return self._engine

    def _warm_up(self, key: Any) -> None:
        """One small fill right after a load, so that the first real fill is not the engine's first.
        Skipped if a fill is waiting (it runs at once instead); stopped between steps if one arrives."""
        if self._engine is None or self._engine_key != key or self._warmed == key:
            return
        self._warmed = key
        if self._pending:
            log.info("warm-up skipped: a fill is waiting")
            return
        t0 = time.perf_counter()
        try:
            self._warmup(self._engine, _PendingFill(self))
        except Exception as e:  # noqa: BLE001 - a warm-up is a courtesy
            log.info("warm-up stopped after %.0f ms: %s", (time.perf_counter() - t0) * 1000, e)
        else:
            log.info("warmed up in %.0f ms", (time.perf_counter() - t0) * 1000)

    @property
    def engine(self) -> Any:
        return self._engine

    # -- fills ------------------------------------------------------------------------------

    def cancel(self, key: Hashable) -> None:
        """Cancel the fill running or waiting under ``key``, if any."""
        flag = self._flags.pop(key, None)
        if flag is not None:
            flag.set()

    def cancel_all(self) -> None:
        for key in list(self._flags):
            self.cancel(key)

    async def fill(
        self, key: Hashable, request: FillRequest, *, debounce_s: float = 0.0, cache_key: Hashable | None = None,
        elastic: bool = False, on_draft: Callable[[Draft], None] | None = None, draft_every: int = 1,
    ) -> FillResult:
        """The engine's result for ``request``; raises Cancelled if a newer fill took ``key``.

        ``on_draft``: called on the event loop with the fill's drafts (every ``draft_every``
        denoising steps) while it runs, until it is cancelled, and never once this returned or
        raised. A cached result, or a job shared after its batch started, has none.

        An ``elastic`` fill does less work when it shares a batch with others (:func:`lighten`);
        such results are not cached (a quiet moment would fill the same text better).

        A fill equal to one waiting or running under another key (same ``cache_key`` and options:
        an inline and a completion request at the same place) shares that job instead of running
        twice; the job stops only once every request sharing it is cancelled.

        Awaiting this in a task that gets cancelled (``$/cancelRequest``) sets the cancel flag too.
        """
        self._asked_at = time.monotonic()
        self.cancel(key)
        flag = threading.Event()
        self._flags[key] = flag
        relay = Relay(asyncio.get_running_loop(), on_draft, flag.is_set) if on_draft is not None else None
        try:
            if debounce_s > 0:
                await asyncio.sleep(debounce_s)
            if flag.is_set():
                raise Cancelled("superseded by a newer request")
            full_key = None if cache_key is None else (self._engine_key, request.options, cache_key)
            if full_key is not None and (hit := self.cache.get(full_key)) is not None:
                return hit
            shared = self._inflight.get(full_key) if full_key is not None else None
            if shared is not None and not shared.future.done() and not shared.flag.is_set():
                shared.flag.flags.append(flag)
                if relay is not None:
                    shared.relays.append(relay)
                result, _ = await asyncio.shield(_awaitable(shared.future))
                if flag.is_set():
                    raise Cancelled("superseded by a newer request")
                return result
            job = _Job(key, request, _AllSet([flag]), elastic, relays=[relay] if relay is not None else [],
                       draft_every=max(1, draft_every))
            if full_key is not None:
                self._inflight[full_key] = job
            with self._queued:
                self._pending.append(job)
                self._queued.notify()
                if not self._drain_queued:  # else the queued drain will take this job too
                    self._drain_queued = True
                    self._executor.submit(self._run_pending)
            try:
                result, lightened = await asyncio.shield(_awaitable(job.future))
            finally:
                if self._inflight.get(full_key) is job:
                    del self._inflight[full_key]
            if full_key is not None and not lightened:
                self.cache.put(full_key, result)
            if flag.is_set():  # another request kept the shared job running; this one is stale
                raise Cancelled("superseded by a newer request")
            return result
        except asyncio.CancelledError:
            flag.set()
            raise
        finally:
            if relay is not None:  # before the caller resumes: no draft after the result
                relay.close()
            if self._flags.get(key) is flag:
                del self._flags[key]

    def _take_pending(self, limit: int) -> list[_Job]:
        """Up to ``limit`` pending jobs; cancelled ones are answered with Cancelled and dropped."""
        jobs: list[_Job] = []
        with self._queued:
            while self._pending and len(jobs) < limit:
                job = self._pending.pop(0)
                if not job.future.set_running_or_notify_cancel():
                    continue  # its awaiter is gone
                if job.flag.is_set():
                    job.future.set_exception(Cancelled("cancelled before it started"))
                    continue
                jobs.append(job)
        return jobs

    def _run_pending(self) -> None:
        """Run the pending jobs as one batch and resolve each job's future (runs in the worker)."""
        self._wait_for_typists()
        with self._queued:
            jobs = self._take_pending(self.max_batch)
            self._drain_queued = False
            if self._pending:  # more than max_batch: the rest go next
                self._drain_queued = True
                self._executor.submit(self._run_pending)
        if not jobs:
            return  # all were cancelled
        log.debug("filling a batch of %d", len(jobs))
        try:
            self._run_batch(jobs)
        finally:
            now = time.monotonic()
            self._answered.update((job.key, now) for job in jobs)
            if self._first_since_load and self.load_done_at is not None:
                self._first_since_load = False
                if any(job.queued_at <= self.load_done_at for job in jobs):
                    log.info("a fill that came during the load was answered %.0f ms after the load ended",
                             (now - self.load_done_at) * 1000)
        cursor = [job.request for job in jobs if job.elastic]
        if cursor:
            if self._ahead is None:
                self._executor.submit(self._encode_ahead)
            self._ahead = cursor[-1]

    def _encode_ahead(self) -> None:
        """Once no fill was asked for AHEAD_IDLE_S, the latest cursor fill's context as typing is about
        to move its prefix's start (Engine.encode_ahead), stopped as soon as a fill is asked for."""
        while True:
            with self._queued:
                if self._pending:
                    self._ahead = None
                    return
                left = self._asked_at + AHEAD_IDLE_S - time.monotonic()
                if left <= 0:
                    break
                self._queued.wait(left)
        request, self._ahead = self._ahead, None
        encode = getattr(self._engine, "encode_ahead", None)
        if request is None or encode is None:
            return
        t0 = time.perf_counter()
        try:
            kept = encode(request, stop=_Asked(self, time.monotonic()))
        except Exception as e:  # noqa: BLE001 - a courtesy, like the warm-up: the next fill encodes what it needs
            log.info("encoding a context ahead failed: %s", e)
            return
        log.debug("a context ahead: %d tokens kept, %.0f ms", kept, (time.perf_counter() - t0) * 1000)

    def _wait_for_typists(self) -> None:
        """Wait (at most batch_wait_s) until every recently answered key has a job pending."""
        now = time.monotonic()
        self._answered = {k: t for k, t in self._answered.items() if now - t < RECENT_S}
        if len(self._answered) < 2 or self.batch_wait_s <= 0:
            return
        with self._queued:
            self._queued.wait_for(lambda: len(self._pending) >= self.max_batch
                                  or self._answered.keys() <= {j.key for j in self._pending}, self.batch_wait_s)

    def _batch_requests(self, jobs: list[_Job]) -> list[FillRequest]:
        config = getattr(self._engine, "config", None)
        default_steps = getattr(self._engine, "default_steps", None)
        if len(jobs) < 2 or config is None or default_steps is None:
            return [j.request for j in jobs]
        return [lighten(j.request, len(jobs), config.candidates, default_steps) if j.elastic else j.request
                for j in jobs]

    def _run_batch(self, jobs: list[_Job]) -> None:
        jobs.sort(key=lambda j: not j.drafting)  # stable: the oldest job that wants drafts first
        requests = self._batch_requests(jobs)
        try:
            results = self._fill(requests, _AllSet([j.flag for j in jobs]), jobs[0])
        except BaseException as e:  # noqa: BLE001 - delivered to the jobs' awaiters
            if isinstance(e, InfillError) and not isinstance(e, Cancelled) and len(jobs) > 1:
                log.info("a batch of %d fills failed (%s); filling them one by one", len(jobs), e)
                for job in jobs:
                    self._run_one(job)
            else:  # every job was cancelled, or a bug: every awaiter hears of it
                for job in jobs:
                    job.future.set_exception(e)
            return
        for job, request, result in zip(jobs, requests, results):
            if job.flag.is_set():  # cancelled while the rest of its batch ran on
                job.future.set_exception(Cancelled("cancelled while it ran"))
            else:
                job.future.set_result((result, request is not job.request))

    def _run_one(self, job: _Job) -> None:
        try:
            if job.flag.is_set():
                raise Cancelled("cancelled before it started")
            job.future.set_result((self._fill([job.request], job.flag, job)[0], False))
        except BaseException as e:  # noqa: BLE001 - delivered to the job's awaiter
            job.future.set_exception(e)

    def _fill(self, requests: list[FillRequest], cancel: Any, first: _Job) -> list[FillResult]:
        """The engine's results; ``first``: the job of ``requests[0]``, whose drafts it streams."""
        if self._engine is None:
            if self._load_error is not None:
                raise ModelLoadError(f"the model could not be loaded: {self._load_error}")
            self._load(self._engine_key)
        if not first.drafting:
            return self._engine.fill_batch(requests, cancel=cancel)
        return self._engine.fill_batch(requests, cancel=cancel, on_draft=first.draft, drafts=first.draft_every)

    def shutdown(self) -> None:
        self.cancel_all()
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._take_pending(len(self._pending))  # answers the jobs whose drain was cancelled
