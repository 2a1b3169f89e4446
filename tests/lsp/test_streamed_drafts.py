"""Streaming drafts (issue 27, the opt-in ``drafts`` option): while ghost text is filled, the
server sends its partly denoised fill as ``infill/draft`` notifications (lsp/drafts.py).

In process (``fill_at_cursor`` with the notifications recorded), with the tiny random model, the
bundled default model (a causal model: its drafts are the fill's prefix so far), a running
``infill serve`` through the engine client (``infill lsp --engine ws://``), and a stand-in engine
that steps only when told (to place a cancellation between a step and its draft). Over stdio, as
an editor gets them: tests/lsp/test_server.py.
"""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest
from lsprotocol import types
from pygls.workspace import Workspace

from infill.errors import Cancelled
from infill.protocol import Draft, Fill, FillResult, Timings
from infill.lsp.drafts import DRAFT_NOTIFICATION
from infill.lsp.options import parse_options
from infill.lsp.server import create_server

SOURCE = "def add(a, b):\n    return a + b\n\n\nx = add(1, 2)\ny = hel\n"
URI = "file:///virtual/drafts.py"
AT = types.Position(5, 7)  # after "hel"
SLOW = {"maxTokens": 8, "steps": 8, "debounceMs": 0, "device": "cpu"}  # 8 steps: one token each


def in_process(loader, options: dict, source: str = SOURCE):
    """A server with ``options`` and ``source`` open at URI; ``server.events``: the infill/draft
    notifications it sends (their params), and "result" where a test's fill returned."""
    server = create_server(loader=loader)
    server.options, problems = parse_options(options)
    assert not problems
    server.protocol._workspace = Workspace(None)
    server.workspace.put_text_document(types.TextDocumentItem(uri=URI, language_id="python", version=1, text=source))
    server.events = []
    server.protocol.notify = lambda method, params=None: server.events.append(params) if method == DRAFT_NOTIFICATION else None
    return server


async def suggest(server, position: types.Position = AT, kind: str = "inline") -> str | None:
    """The ghost text at ``position``, then "result" in the server's events; a moment later, so
    that a draft sent late would be seen."""
    got = await server.fill_at_cursor(URI, position, automatic=False, kind=kind)
    server.events.append("result")
    await asyncio.sleep(0.2)
    return got and got[2]


@pytest.mark.asyncio
async def test_drafts_come_when_opted_in_before_the_result_and_never_after(tiny_engine):
    server = in_process(lambda key: tiny_engine, {**SLOW, "drafts": 1})
    try:
        await suggest(server)
        *drafts, last = server.events
        assert last == "result" and "result" not in drafts  # every draft came before the result
        assert len(drafts) >= 2, drafts
        assert [d["seq"] for d in drafts] == list(range(1, len(drafts) + 1))
        assert {d["id"] for d in drafts} == {drafts[0]["id"]}
        assert all(d["textDocument"] == {"uri": URI, "version": 1} and d["position"] == {"line": 5, "character": 7}
                   for d in drafts)
        assert all(d["text"].strip() for d in drafts)
        assert [d["step"] for d in drafts] == sorted({d["step"] for d in drafts})
        # The next fill is a newer one: a larger id.
        server.workspace.update_text_document(types.VersionedTextDocumentIdentifier(uri=URI, version=2),
                                              types.TextDocumentContentChangeWholeDocument(text=SOURCE + "\n"))
        server.events.clear()
        await suggest(server)
        assert server.events[0]["id"] > drafts[0]["id"] and server.events[0]["textDocument"]["version"] == 2
    finally:
        server.scheduler.shutdown()


@pytest.mark.asyncio
async def test_no_drafts_when_off_nor_for_the_completion_list(tiny_engine):
    server = in_process(lambda key: tiny_engine, SLOW)
    try:
        assert await suggest(server)
        assert server.events == ["result"]
        server.options, _ = parse_options({**SLOW, "drafts": 1})
        server.workspace.update_text_document(types.VersionedTextDocumentIdentifier(uri=URI, version=2),
                                              types.TextDocumentContentChangeWholeDocument(text=SOURCE + "\n"))
        server.events.clear()
        assert await suggest(server, kind="completion")  # (another text: not the cached fill)
        assert server.events == ["result"]  # drafts are ghost text's only
    finally:
        server.scheduler.shutdown()


@pytest.mark.asyncio
async def test_drafts_every_n_steps_and_the_suggestion_is_the_same_with_them(tiny_engine):
    shown = {}
    for every in (0, 3):
        server = in_process(lambda key: tiny_engine, {**SLOW, "drafts": every})
        try:
            shown[every] = await suggest(server)
            steps = [d["step"] for d in server.events[:-1]]
            assert all(s % 3 == 0 for s in steps) and bool(steps) == bool(every), steps
        finally:
            server.scheduler.shutdown()
    assert shown[0] and shown[3] == shown[0]


@pytest.mark.asyncio
async def test_a_causal_models_drafts_are_the_suggestions_start_without_the_lines_indentation(default_engine):
    # The cursor after a line's indentation: the engine moves that indentation into the hole
    # (engine/fill.py, line_start_holes) and takes it off the fill again; a draft must too.
    source = "def mean(values):\n    total = sum(values)\n    \n"
    options = {"maxTokens": 16, "debounceMs": 0, "device": "cpu", "minScore": -1000}
    shown = {}
    for every in (0, 1):
        server = in_process(lambda key: default_engine, {**options, "drafts": every}, source)
        try:
            shown[every] = await suggest(server, types.Position(2, 4))
            drafts = [d["text"] for d in server.events[:-1]]
        finally:
            server.scheduler.shutdown()
    assert shown[0] and shown[1] == shown[0], shown
    assert len(drafts) >= 2, drafts
    # Left to right: each draft goes on from the one before, and the suggestion from them.
    for before, after in zip(drafts, drafts[1:] + [shown[1]]):
        assert after.startswith(before.rstrip()), (before, after, drafts)


class Stepping:
    """A stand-in engine whose fill takes one step each time the test says ``go`` and drafts it:
    a step that was under way when the fill was cancelled still drafts, as a real engine's does
    (it looks at its cancel flag between steps)."""

    model_id, device = "stepping", "cpu"
    model = SimpleNamespace(languages=None)

    def __init__(self):
        self.go = threading.Semaphore(0)
        self.running = threading.Event()

    def fill_batch(self, requests, cancel=None, on_draft=None, drafts=1):
        self.running.set()
        for step in range(1, 100):
            assert self.go.acquire(timeout=30)
            cancelled = cancel is not None and cancel.is_set()
            if on_draft is not None and step % drafts == 0:
                on_draft(Draft(step=step, texts=[f"x{step}"], masked=100 - step))
            if cancelled:
                raise Cancelled("stepping: cancelled")
            if step == 3:
                return [FillResult(fills=[Fill(text="done", score=0.0, valid=True)], timings=Timings(), model="stepping")
                        for _ in requests]


async def until(condition, what: str) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(what)


@pytest.mark.asyncio
async def test_a_superseded_fills_drafts_stop_at_once():
    engine = Stepping()
    server = in_process(lambda key: engine, {**SLOW, "drafts": 1})
    try:
        older = asyncio.ensure_future(suggest(server))
        await until(engine.running.is_set, "the first fill started")
        engine.go.release()
        await until(lambda: len(server.events) == 1, "the first fill's first draft")
        first_id = server.events[0]["id"]
        newer = asyncio.ensure_future(suggest(server, types.Position(4, 3)))  # the cursor moved: supersedes the first
        await until(lambda: server.scheduler._pending, "the newer fill queued")
        superseded_at = len(server.events)
        engine.go.release()  # the step under way when it was superseded ends, and drafts (x2)
        assert await older is None
        for _ in range(3):  # the newer fill: three steps, three drafts
            engine.go.release()
        assert await newer == "done"
        assert superseded_at == 1 and [e if e == "result" else (e["id"] == first_id, e["text"]) for e in server.events] == [
            (True, "x1"), "result", (False, "x1"), (False, "x2"), (False, "x3"), "result"], server.events
    finally:
        server.scheduler.shutdown()


@pytest.mark.asyncio
async def test_drafts_through_an_engine_server(tiny_engine, one_torch_thread):
    """``infill lsp --engine ws://``: the engine client streams the serve protocol's draft frames."""
    from infill.serve.client import EngineClient
    from infill.serve.server import ServeConfig, ServerThread

    srv = ServerThread(tiny_engine, ServeConfig(port=0))
    client = EngineClient(srv.url)
    shown = {}
    try:
        for every in (0, 3):  # (3: not the engine client's default, 4)
            server = in_process(lambda key: client, {**SLOW, "drafts": every})
            try:
                shown[every] = await suggest(server)
                *drafts, last = server.events
                assert last == "result" and "result" not in drafts
                assert bool(drafts) == bool(every) and all(d["step"] % 3 == 0 for d in drafts), drafts
            finally:
                server.scheduler.shutdown()
    finally:
        client.close()
        srv.stop()
    assert shown[0] and shown[3] == shown[0]
