"""The worker batches: fills from several documents waiting together run through ONE
``Engine.fill_batch`` call, each still gets its own answer, and cancelling one spares the others.

In process, with a spy around the tiny engine; the worker is held at a gate so that the fills
under test are all pending when it gets to them.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from infill.errors import Cancelled, RequestError
from infill.protocol import FillRequest, Hole, SamplingOptions
from infill.lsp.scheduler import Scheduler

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEXTS = {
    "a.py": "def add(a, b):\n    return a + b\n\n\nx = add(1, 2)\ny = hel",
    "b.py": "import os\n\nfor name in os.listdir('.'):\n    print(",
    "c.py": "class Point:\n    def __init__(self, x, y):\n        self.x = ",
    "d.py": "with open(path) as f:\n    data = ",
}


def request(text: str, max_tokens: int = 8) -> FillRequest:
    return FillRequest(text=text, holes=[Hole(len(text), len(text), max_tokens)], options=SamplingOptions(steps=2))


class Spy:
    """The engine, recording each fill_batch call; ``during`` runs inside the call, before the fill."""

    def __init__(self, engine):
        self.engine = engine
        self.calls: list[list[FillRequest]] = []
        self.flags: list = []
        self.during = None

    def fill_batch(self, requests, cancel=None, **drafting):
        self.calls.append(list(requests))
        self.flags.append(cancel)
        if self.during is not None:
            self.during()
        return self.engine.fill_batch(requests, cancel=cancel, **drafting)


def gated_scheduler(engine) -> tuple[Scheduler, Spy, threading.Event]:
    """A scheduler whose worker is busy loading the spy until the returned gate is set."""
    spy, gate = Spy(engine), threading.Event()

    def loader(key):
        assert gate.wait(30)
        return spy

    scheduler = Scheduler(loader)
    scheduler.load(("tiny", "cpu"))
    return scheduler, spy, gate


async def start_fills(scheduler: Scheduler, names, make=None, elastic=False, drafts=None) -> dict[str, asyncio.Task]:
    """The fills of ``names``, queued; ``drafts``: {name: its on_draft} for those that want drafts."""
    make = make or (lambda n: request(TEXTS[n]))
    drafts = drafts or {}
    tasks = {n: asyncio.ensure_future(scheduler.fill((n, "cursor"), make(n), elastic=elastic, cache_key=n, on_draft=drafts.get(n)))
             for n in names}
    for _ in range(50):  # until every fill is queued for the worker
        await asyncio.sleep(0.01)
        if len(scheduler._pending) == len(tasks):
            break
    assert len(scheduler._pending) == len(tasks)
    return tasks


async def test_concurrent_documents_share_one_fill_batch(tiny_engine):
    scheduler, spy, gate = gated_scheduler(tiny_engine)
    try:
        tasks = await start_fills(scheduler, TEXTS)
        gate.set()
        results = {n: await asyncio.wait_for(t, 60) for n, t in tasks.items()}
        assert [len(c) for c in spy.calls] == [len(TEXTS)]  # one batched call for all documents
        for name, result in results.items():  # each its own answer, as if filled alone
            assert result.fills[0].text == tiny_engine.fill(request(TEXTS[name])).fills[0].text
    finally:
        scheduler.shutdown()


async def test_a_fill_that_wants_drafts_goes_first_in_its_batch(tiny_engine):
    # The engine streams the drafts of its batch's first request only (Engine.fill_batch).
    scheduler, spy, gate = gated_scheduler(tiny_engine)
    drafts = []
    try:
        tasks = await start_fills(scheduler, TEXTS, make=lambda n: request(TEXTS[n], 4), drafts={"c.py": drafts.append})
        gate.set()
        results = {n: await asyncio.wait_for(t, 60) for n, t in tasks.items()}
        assert [len(c) for c in spy.calls] == [len(TEXTS)] and spy.calls[0][0].text == TEXTS["c.py"]
        for name, result in results.items():  # each still its own answer
            assert result.fills[0].text == tiny_engine.fill(request(TEXTS[name], 4)).fills[0].text
        lone = []
        tiny_engine.fill(request(TEXTS["c.py"], 4), on_draft=lone.append)
        assert drafts and [d.texts for d in drafts] == [d.texts for d in lone]  # c.py's drafts
    finally:
        scheduler.shutdown()


async def test_cancelling_one_fill_spares_the_rest_of_its_batch(tiny_engine):
    scheduler, spy, gate = gated_scheduler(tiny_engine)
    try:
        tasks = await start_fills(scheduler, TEXTS)
        scheduler.cancel(("a.py", "cursor"))  # before the batch starts: left out of it
        running, go = threading.Event(), threading.Event()

        def during():
            running.set()
            assert go.wait(30)

        spy.during = during
        gate.set()
        assert await asyncio.to_thread(running.wait, 30)
        scheduler.cancel(("b.py", "cursor"))  # while the batch runs: its result is dropped
        assert not spy.flags[0].is_set()  # the batch goes on for c.py and d.py
        go.set()
        with pytest.raises(Cancelled):
            await asyncio.wait_for(tasks["a.py"], 60)
        with pytest.raises(Cancelled):
            await asyncio.wait_for(tasks["b.py"], 60)
        for name in ("c.py", "d.py"):
            result = await asyncio.wait_for(tasks[name], 60)
            assert result.fills[0].text == tiny_engine.fill(request(TEXTS[name])).fills[0].text
        assert [len(c) for c in spy.calls] == [3]
    finally:
        scheduler.shutdown()


async def test_cancelling_every_fill_stops_the_batch(tiny_engine):
    scheduler, spy, gate = gated_scheduler(tiny_engine)
    try:
        tasks = await start_fills(scheduler, ["a.py", "b.py"])
        running, go = threading.Event(), threading.Event()
        spy.during = lambda: (running.set(), go.wait(30))
        gate.set()
        assert await asyncio.to_thread(running.wait, 30)
        scheduler.cancel(("a.py", "cursor"))
        assert not spy.flags[0].is_set()
        scheduler.cancel(("b.py", "cursor"))
        assert spy.flags[0].is_set()  # the engine stops between steps
        go.set()
        for task in tasks.values():
            with pytest.raises(Cancelled):
                await asyncio.wait_for(task, 60)
    finally:
        scheduler.shutdown()


async def test_a_bad_request_fails_alone(tiny_engine):
    scheduler, spy, gate = gated_scheduler(tiny_engine)
    try:
        tasks = await start_fills(scheduler, ["a.py", "b.py"])
        bad = asyncio.ensure_future(scheduler.fill(("bad.py", "cursor"), request("x", max_tokens=10_000)))
        await asyncio.sleep(0.05)
        gate.set()
        with pytest.raises(RequestError):
            await asyncio.wait_for(bad, 60)
        for name, task in tasks.items():
            result = await asyncio.wait_for(task, 60)
            assert result.fills[0].text == tiny_engine.fill(request(TEXTS[name])).fills[0].text
        assert [len(c) for c in spy.calls] == [3, 1, 1, 1]  # the batch, then one by one
    finally:
        scheduler.shutdown()


async def test_max_batch_splits_the_queue(tiny_engine):
    scheduler, spy, gate = gated_scheduler(tiny_engine)
    scheduler.max_batch = 3
    try:
        tasks = await start_fills(scheduler, TEXTS)
        gate.set()
        for task in tasks.values():
            await asyncio.wait_for(task, 60)
        assert [len(c) for c in spy.calls] == [3, 1]
    finally:
        scheduler.shutdown()


async def test_the_worker_waits_for_documents_typing_together(tiny_engine):
    scheduler, spy, gate = gated_scheduler(tiny_engine)
    scheduler.batch_wait_s = 10.0  # long, so that the test does not depend on timing
    try:
        gate.set()
        alone = asyncio.ensure_future(scheduler.fill(("a.py", "cursor"), request(TEXTS["a.py"])))
        await asyncio.wait_for(alone, 5)  # a lone typist never waits
        first = [asyncio.ensure_future(scheduler.fill((n, "cursor"), request(TEXTS[n]))) for n in ("a.py", "b.py")]
        await asyncio.wait_for(asyncio.gather(*first), 60)
        # Both were just answered: a's next fill waits for b's (sent a little later), and they share a batch.
        late = asyncio.ensure_future(scheduler.fill(("a.py", "cursor"), request(TEXTS["a.py"] + "l")))
        await asyncio.sleep(0.3)
        assert not late.done()
        other = asyncio.ensure_future(scheduler.fill(("b.py", "cursor"), request(TEXTS["b.py"] + "x")))
        await asyncio.wait_for(asyncio.gather(late, other), 5)
        assert [len(c) for c in spy.calls][-1] == 2
    finally:
        scheduler.shutdown()


async def test_elastic_fills_do_less_work_in_a_batch_and_are_not_cached(tiny_engine):
    scheduler, spy, gate = gated_scheduler(tiny_engine)
    spy.config = tiny_engine.config
    spy.default_steps = tiny_engine.default_steps
    wide = lambda n: FillRequest(text=TEXTS[n], holes=[Hole(len(TEXTS[n]), len(TEXTS[n]), 8)])
    try:
        tasks = await start_fills(scheduler, TEXTS, make=wide, elastic=True)
        gate.set()
        for t in tasks.values():
            await asyncio.wait_for(t, 60)
        (batch,) = spy.calls
        assert all(r.options.candidates == 1 and r.options.steps == 2 for r in batch)  # 8 slots / 2 per step / 2
        assert len(scheduler.cache._items) == 0
        alone = await asyncio.wait_for(scheduler.fill(("a.py", "cursor"), wide("a.py"), elastic=True, cache_key="a"), 60)
        assert spy.calls[-1][0].options == wide("a.py").options  # alone: the full work
        assert len(scheduler.cache._items) == 1 and alone.fills
    finally:
        scheduler.shutdown()


async def test_fill_holes_jobs_keep_their_full_work_in_a_batch(tiny_engine):
    scheduler, spy, gate = gated_scheduler(tiny_engine)
    spy.config = tiny_engine.config
    spy.default_steps = tiny_engine.default_steps
    try:
        tasks = await start_fills(scheduler, ["a.py", "b.py"])
        gate.set()
        for t in tasks.values():
            await asyncio.wait_for(t, 60)
        assert [r.options for r in spy.calls[0]] == [request(TEXTS[n]).options for n in ("a.py", "b.py")]
    finally:
        scheduler.shutdown()


async def test_a_request_cancelled_while_it_waits_leaves_no_unretrieved_error(tiny_engine):
    """$/cancelRequest cancels the awaiting task; its job then ends in Cancelled in the worker:
    nothing may be logged as "Future exception was never retrieved" (a flood while typing)."""
    import gc

    loop = asyncio.get_running_loop()
    errors, before = [], loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: errors.append(context.get("message")))
    scheduler, spy, gate = gated_scheduler(tiny_engine)
    try:
        tasks = await start_fills(scheduler, ["a.py"])
        tasks["a.py"].cancel()
        with pytest.raises(asyncio.CancelledError):
            await tasks["a.py"]
        gate.set()
        for _ in range(100):  # until the worker has answered the job
            await asyncio.sleep(0.02)
            if not scheduler._pending and not scheduler._drain_queued:
                break
        await asyncio.sleep(0.1)
        gc.collect()
        await asyncio.sleep(0)
        assert not errors, errors
    finally:
        loop.set_exception_handler(before)
        scheduler.shutdown()


class Ahead(Spy):
    """The spy with an encode_ahead that runs until its stop flag is set (at most 10 s)."""

    def __init__(self, engine):
        super().__init__(engine)
        self.ahead: list[FillRequest] = []
        self.stopped = threading.Event()

    def encode_ahead(self, request, stop=None):
        self.ahead.append(request)
        for _ in range(1000):
            if stop.is_set():
                self.stopped.set()
                break
            threading.Event().wait(0.01)
        return 0


async def test_an_idle_worker_encodes_the_latest_cursor_fills_context_ahead_and_stops_for_a_fill(tiny_engine, monkeypatch):
    monkeypatch.setattr("infill.lsp.scheduler.AHEAD_IDLE_S", 0.2)
    spy, gate = Ahead(tiny_engine), threading.Event()
    gate.set()
    scheduler = Scheduler(lambda key: spy)
    scheduler.load(("tiny", "cpu"))
    try:
        await asyncio.wait_for(scheduler.fill(("a.py", "fill"), request(TEXTS["a.py"])), 60)
        await asyncio.sleep(0.4)
        assert spy.ahead == []  # a Fill holes job: no document is being typed in
        for k in range(3):  # keystrokes closer together than AHEAD_IDLE_S: nothing is encoded ahead between them
            await asyncio.wait_for(scheduler.fill(("b.py", "cursor"), request(TEXTS["b.py"] + "x" * k), elastic=True), 60)
            assert spy.ahead == []
        await asyncio.sleep(0.4)
        assert spy.ahead == [request(TEXTS["b.py"] + "xx")] and not spy.stopped.is_set()  # the latest, once idle
        await asyncio.wait_for(scheduler.fill(("b.py", "cursor"), request(TEXTS["b.py"] + "xxx"), elastic=True), 5)
        assert spy.stopped.is_set() and len(spy.ahead) == 1
    finally:
        scheduler.shutdown()
