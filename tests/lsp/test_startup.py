"""Start-up (issue 29): the model loads in the background from ``initialize``; a fill that comes
during the load runs as soon as the load ends (no warm-up before it); with nothing waiting, a
warm-up fill runs after the load and gives way to the first real fill."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest
from lsprotocol import types
from pygls.workspace import Workspace

from infill.errors import Cancelled
from infill.lsp.options import parse_options
from infill.lsp.scheduler import _PendingFill
from infill.lsp.server import create_server

SOURCE = "def add(a, b):\n    return a + b\n\n\nx = add(1, 2)\ny = hel\n"
URI = "file:///virtual/startup.py"


class Spy:
    """The engine, recording each fill_batch call and whether it was the warm-up."""

    def __init__(self, engine):
        self.engine, self.config, self.model_id = engine, engine.config, engine.model_id
        self.calls: list[str] = []
        self.hold_warm_up = False  # the warm-up waits until a real fill is pending, then stops

    def default_steps(self, slots):
        return self.engine.default_steps(slots)

    def fill_batch(self, requests, cancel=None):
        if isinstance(cancel, _PendingFill):
            self.calls.append("warm-up")
            if self.hold_warm_up:
                deadline = time.monotonic() + 30
                while not cancel.is_set() and time.monotonic() < deadline:
                    time.sleep(0.005)
                self.calls.append("warm-up stopped" if cancel.is_set() else "warm-up ran on")
                raise Cancelled("a fill is waiting")
        else:
            self.calls.append("fill")
        return self.engine.fill_batch(requests, cancel=cancel)


def server_with(loader):
    server = create_server(loader=loader)
    server.options, problems = parse_options({"maxTokens": 8, "steps": 2, "debounceMs": 0, "device": "cpu"})
    assert not problems
    server.protocol._workspace = Workspace(None)
    server.workspace.put_text_document(types.TextDocumentItem(uri=URI, language_id="python", version=1, text=SOURCE))
    return server


@pytest.mark.asyncio
async def test_a_fill_that_comes_during_the_load_is_answered_when_the_load_ends(tiny_engine, caplog):
    spy, gate = Spy(tiny_engine), threading.Event()

    def slow_load(key):
        assert gate.wait(30)
        return spy

    server = server_with(slow_load)
    try:
        server.start_load()  # what initialize does
        pending = asyncio.ensure_future(server.fill_at_cursor(URI, types.Position(5, 7), automatic=True))
        for _ in range(500):
            if server.scheduler._pending:
                break
            await asyncio.sleep(0.01)
        assert server.scheduler._pending and not pending.done()  # waiting for the load
        with caplog.at_level(logging.INFO, logger="infill.lsp.scheduler"):
            gate.set()
            got = await asyncio.wait_for(pending, 30)
            answered = time.monotonic()
            for _ in range(200):
                if any("came during the load" in r.getMessage() for r in caplog.records):
                    break
                await asyncio.sleep(0.01)
        delay_ms = (answered - server.scheduler.load_done_at) * 1000
        print(f"load end -> answer: {delay_ms:.0f} ms")
        assert got is not None and got[2]
        assert spy.calls == ["fill"]  # no warm-up in front of it: it ran as soon as the model was there
        assert any("came during the load was answered" in r.getMessage() for r in caplog.records)
        assert delay_ms < 5000  # the fill itself (tens of ms for the tiny model), with room for a busy machine
    finally:
        server.scheduler.shutdown()


@pytest.mark.asyncio
async def test_the_warm_up_runs_when_idle_and_gives_way_to_the_first_fill(tiny_engine):
    spy = Spy(tiny_engine)
    spy.hold_warm_up = True
    server = server_with(lambda key: spy)
    try:
        await asyncio.wrap_future(server.start_load())
        for _ in range(500):
            if spy.calls:
                break
            await asyncio.sleep(0.01)
        assert spy.calls == ["warm-up"]  # nothing waiting: the worker warms the engine up
        got = await asyncio.wait_for(server.fill_at_cursor(URI, types.Position(5, 7), automatic=False), 30)
        assert got is not None
        assert spy.calls == ["warm-up", "warm-up stopped", "fill"]  # the real fill stopped it
        await asyncio.wrap_future(server.start_load())  # the same model again: no second load, no second warm-up
        assert spy.calls == ["warm-up", "warm-up stopped", "fill"]
    finally:
        server.scheduler.shutdown()
