"""``fill_at_cursor`` in process: a fill that comes back for a text the user has typed on since is
dropped (issue 25, step 7).

Over stdio the race is hard to hit: ``didChange`` cancels the pending fill, so the usual outcome
is a cancelled fill and the outdated-version check never runs. The race it guards is a change
that lands after the worker answered and before the handler resumed (or a document replaced by
a second ``didOpen``). Here the change is made exactly there, so deleting the check fails these
tests.
"""

from __future__ import annotations

import pytest
from lsprotocol import types
from pygls.workspace import Workspace

from infill.lsp.options import parse_options
from infill.lsp.server import create_server

SOURCE = "def add(a, b):\n    return a + b\n\n\nx = add(1, 2)\ny = hel\n"
URI = "file:///virtual/outdated.py"
FAST = {"maxTokens": 8, "steps": 2, "debounceMs": 0, "device": "cpu"}


def _server(tiny_engine):
    server = create_server(loader=lambda key: tiny_engine)
    server.options, problems = parse_options(FAST)
    assert not problems
    server.protocol._workspace = Workspace(None)
    server.workspace.put_text_document(types.TextDocumentItem(uri=URI, language_id="python", version=1, text=SOURCE))
    return server


def _typed_after_the_answer(server, change):
    """Make ``change()`` happen after the worker answers and before ``fill_at_cursor`` resumes."""
    real_fill = server.scheduler.fill

    async def fill(*args, **kwargs):
        result = await real_fill(*args, **kwargs)
        assert result.fills, "the worker answered"
        change()
        return result

    server.scheduler.fill = fill


@pytest.mark.asyncio
async def test_an_answer_for_the_current_text_is_kept(tiny_engine):
    server = _server(tiny_engine)
    try:
        got = await server.fill_at_cursor(URI, types.Position(5, 7), automatic=False)
        assert got is not None and got[0] == SOURCE  # the control: this text and position give a fill
    finally:
        server.scheduler.shutdown()


@pytest.mark.asyncio
async def test_an_answer_for_an_outdated_version_is_dropped(tiny_engine):
    server = _server(tiny_engine)

    def type_on():  # what pygls does for a didChange (version 2), minus our handler's cancel: too late for it
        server.workspace.update_text_document(
            types.VersionedTextDocumentIdentifier(uri=URI, version=2),
            types.TextDocumentContentChangeWholeDocument(text=SOURCE + "# typed\n"))

    _typed_after_the_answer(server, type_on)
    try:
        assert await server.fill_at_cursor(URI, types.Position(5, 7), automatic=False) is None
    finally:
        server.scheduler.shutdown()


@pytest.mark.asyncio
async def test_an_answer_for_a_replaced_document_is_dropped(tiny_engine):
    server = _server(tiny_engine)

    def reopen():  # a second didOpen: a new document object with the same version number
        server.workspace.put_text_document(
            types.TextDocumentItem(uri=URI, language_id="python", version=1, text="z = 0\n" + SOURCE))

    _typed_after_the_answer(server, reopen)
    try:
        assert await server.fill_at_cursor(URI, types.Position(5, 7), automatic=False) is None
    finally:
        server.scheduler.shutdown()


@pytest.mark.asyncio
async def test_a_fill_that_does_not_parse_is_never_shown(tiny_engine):
    """Issue 29: the language server never shows a fill the engine judged invalid."""
    import msgspec

    server = _server(tiny_engine)
    real_fill = server.scheduler.fill

    async def judged_invalid(*args, **kwargs):
        result = await real_fill(*args, **kwargs)
        return msgspec.structs.replace(result, fills=[msgspec.structs.replace(f, text="x +", valid=False) for f in result.fills])

    server.scheduler.fill = judged_invalid
    try:
        assert await server.fill_at_cursor(URI, types.Position(5, 7), automatic=False) is None
    finally:
        server.scheduler.shutdown()


@pytest.mark.asyncio
async def test_a_suggestion_scored_under_the_floor_is_not_shown(tiny_engine):
    """Issue 28: a cursor suggestion whose score is under minScore (else the model's config.json
    min_score) stays quiet; the same fill over the floor is shown."""
    server = _server(tiny_engine)
    try:
        got = await server.fill_at_cursor(URI, types.Position(5, 7), automatic=False)
        assert got is not None
        server.options, _ = parse_options({**FAST, "minScore": 0.0})  # nothing scores above 0
        assert await server.fill_at_cursor(URI, types.Position(5, 7), automatic=False) is None
        server.options, _ = parse_options({**FAST, "minScore": -1000.0})
        assert await server.fill_at_cursor(URI, types.Position(5, 7), automatic=False) is not None
        server.options, _ = parse_options(FAST)
        server.model_min_score = 0.0  # the model's own floor applies where the client sets none
        assert await server.fill_at_cursor(URI, types.Position(5, 7), automatic=False) is None
    finally:
        server.scheduler.shutdown()


def test_min_score_option_is_checked():
    assert parse_options({"minScore": -0.5})[0].min_score == -0.5
    for bad in (0.5, "low", True, float("nan")):
        options, problems = parse_options({"minScore": bad})
        assert options.min_score is None and problems, bad


@pytest.mark.asyncio
async def test_a_suggestion_at_the_cursor_asks_for_cursor_candidates_and_filling_holes_for_the_default(tiny_engine):
    """Issue 28: the ranked candidates of a causal model cost about 1.8x a fill, so a suggestion at
    the cursor, typed or invoked, ghost text or completion list (which share one fill), asks for
    ``cursorCandidates`` (1 unless set); filling <FILL> holes gets the engine's default (0)."""
    server = _server(tiny_engine)
    asked = []
    real_fill = server.scheduler.fill

    async def spy(key, request, **kwargs):
        asked.append(request.options.candidates)
        return await real_fill(key, request, **kwargs)

    server.scheduler.fill = spy
    try:
        await server.fill_at_cursor(URI, types.Position(5, 7), automatic=True)
        await server.fill_at_cursor(URI, types.Position(5, 7), automatic=False, kind="completion")
        server.options, _ = parse_options({**FAST, "cursorCandidates": 3})
        await server.fill_at_cursor(URI, types.Position(5, 7), automatic=True)
        assert asked == [1, 1, 3]
        assert server.sampling().candidates == 0 and server.sampling(cursor=True).candidates == 3
        # the floor under which a suggestion is not shown: the engine may stop a fill once it is under it
        server.options, _ = parse_options({**FAST, "minScore": -2.5})
        assert server.sampling(cursor=True).min_score == -2.5 and server.sampling().min_score is None
    finally:
        server.scheduler.shutdown()


def test_cursor_candidates_option_is_checked():
    assert parse_options({})[0].cursor_candidates == 1
    assert parse_options({"cursorCandidates": 0})[0].cursor_candidates == 0
    for bad in (-1, 17, 1.5, "2", True):
        options, problems = parse_options({"cursorCandidates": bad})
        assert options.cursor_candidates == 1 and problems, bad


def test_typed_through_is_the_rest_of_the_suggestion_only_where_its_start_was_typed():
    from infill.lsp.server import typed_through

    offered = ("x = \ny = 2\n", 4, "compute(1)")
    assert typed_through(offered, "x = comp\ny = 2\n", 8) == "ute(1)"
    assert typed_through(offered, "x = \ny = 2\n", 4) is None  # nothing typed: a fill as usual
    assert typed_through(offered, "x = cusp\ny = 2\n", 8) is None  # typed something else
    assert typed_through(offered, "x = comp\ny = 3\n", 8) is None  # the rest of the document changed
    assert typed_through(offered, "x = compute(1)\ny = 2\n", 14) is None  # all of it typed
    assert typed_through(("a", 1, "bc  "), "ab", 2) == "c  " and typed_through(("a", 1, "b "), "ab", 2) is None  # blank rest


@pytest.mark.asyncio
async def test_typing_the_start_of_a_suggestion_gets_its_rest_without_a_fill(tiny_engine):
    server = _server(tiny_engine)
    try:
        text, offset, fill, _ = await server.fill_at_cursor(URI, types.Position(5, 7), automatic=False)
        assert len(fill) > 1, fill
        typed = text[:offset] + fill[0] + text[offset:]
        server.workspace.update_text_document(types.VersionedTextDocumentIdentifier(uri=URI, version=2),
                                              types.TextDocumentContentChangeWholeDocument(text=typed))
        fills = []
        real = server.scheduler.fill
        server.scheduler.fill = lambda *a, **k: fills.append(a) or real(*a, **k)
        got = await server.fill_at_cursor(URI, types.Position(5, 8), automatic=False)
        assert got is not None and got[2] == fill[1:] and not fills  # answered from the suggestion, no fill run
    finally:
        server.scheduler.shutdown()


@pytest.mark.asyncio
@pytest.mark.parametrize("related", [True, False])
async def test_other_open_documents_of_the_language_give_context(tiny_engine, related):
    """relatedFiles: the lines of the other open documents of the same language that share names
    with the code before the cursor go with the request, named by their file names."""
    server = _server(tiny_engine)
    server.options, _ = parse_options({**FAST, "relatedFiles": related})
    helper = "def add(a, b):\n    '''Add two numbers.'''\n    return a + b\n"
    server.workspace.put_text_document(types.TextDocumentItem(uri="file:///virtual/lib/helpers.py", language_id="python",
                                                              version=1, text=helper))
    server.workspace.put_text_document(types.TextDocumentItem(uri="file:///virtual/app.js", language_id="javascript",
                                                              version=1, text="function add(a, b) { return a + b; }\n"))
    seen = []
    real_fill = server.scheduler.fill

    async def fill(key, request, **kwargs):
        seen.append(request)
        return await real_fill(key, request, **kwargs)

    server.scheduler.fill = fill
    try:
        assert await server.fill_at_cursor(URI, types.Position(5, 7), automatic=False) is not None
        context = seen[0].context
        if not related:
            assert context == []
            return
        assert [(s.path, s.text) for s in context] == [("helpers.py", helper)]  # not itself, not JavaScript
        # The choice stands near its place while the other documents are unchanged; an edit of one is a new choice.
        server.workspace.put_text_document(types.TextDocumentItem(uri="file:///virtual/lib/more.py", language_id="python",
                                                                  version=1, text="def add(a, b, c):\n    return a + b + c\n"))
        assert await server.fill_at_cursor(URI, types.Position(5, 6), automatic=False) is not None
        assert {s.path for s in seen[-1].context} == {"helpers.py", "more.py"}
        server.options, _ = parse_options({**FAST, "relatedFiles": True})
        kept = server._related[URI]
        server._related[URI] = (kept[0], kept[1], [])  # what was chosen for this place is what is sent
        assert await server.fill_at_cursor(URI, types.Position(5, 5), automatic=False) is not None
        assert seen[-1].context == []
    finally:
        server.scheduler.shutdown()


def test_quiet_through_holds_only_while_the_typed_start_leaves_a_rest_under_the_floor():
    from infill.lsp.server import quiet_through
    from infill.protocol import Partial

    # "compute(1)" written as "comp" "ute" "(1)": log-probabilities -0.5, -1.0, -2.0 (score -3.5)
    had = Partial(text="compute(1)", ends=[4, 7, 10], logprobs=[-0.5, -1.0, -2.0])
    quiet = ("x = \ny = 2\n", 4, had, -2.5)
    assert quiet_through(quiet, "x = c\ny = 2\n", 5, -2.5) == -3.0  # "comp" is cut: left out of the rest
    assert quiet_through(quiet, "x = comp\ny = 2\n", 8, -2.5) == -3.0
    assert quiet_through(quiet, "x = compu\ny = 2\n", 9, -2.5) is None  # the rest, "(1)", scores -2.0: over the floor
    assert quiet_through(quiet, "x = comp\ny = 2\n", 8, -3.5) is None  # another floor: a fill is due
    assert quiet_through(quiet, "x = comp\ny = 2\n", 8, None) is None
    assert quiet_through(quiet, "x = cusp\ny = 2\n", 8, -2.5) is None  # typed something else
    assert quiet_through(quiet, "x = comp\ny = 3\n", 8, -2.5) is None  # the rest of the document changed
    assert quiet_through(quiet, "x = \ny = 2\n", 4, -2.5) is None  # nothing typed
    assert quiet_through(quiet, "x = compute(1)\ny = 2\n", 14, -2.5) is None  # all of it typed
    assert quiet_through(None, "x = c\ny = 2\n", 5, -2.5) is None
    # on an empty line: once a character is typed, a suggestion ends with its line, so the tokens of the
    # lines after it (and one that holds the line break) are no part of the rest
    lines = Partial(text="run()\n    stop()", ends=[3, 6, 10, 16], logprobs=[-0.1, -0.2, -3.0, -3.0])
    assert quiet_through(("    \n", 4, lines, -1.0), "    r\n", 5, -1.0) is None  # "()\n" holds the break: rest 0
    lines = Partial(text="run(x)\n    stop()", ends=[3, 5, 7, 11, 17], logprobs=[-0.1, -1.5, -0.2, -3.0, -3.0])
    assert quiet_through(("    \n", 4, lines, -1.0), "    r\n", 5, -1.0) == -1.5  # "(x": under the floor alone


@pytest.mark.asyncio
async def test_typing_the_start_of_a_fill_under_the_floor_stays_quiet_without_a_fill(tiny_engine):
    """Issue 28: a fill at the cursor stops once it scores under the floor (the default model's,
    tests/test_engine.py) and says what it had written. Where the user then types the start of it
    and the rest still scores under the floor: no suggestion, and no fill run for it; typing
    something else, or on past where the rest scores under the floor, or another floor, runs one."""
    from infill.protocol import Fill, FillResult, Partial, Timings

    server = _server(tiny_engine)
    server.options, _ = parse_options({**FAST, "minScore": -1.0})
    had = Partial(text="lo(1, 2)", ends=[2, 3, 4, 8], logprobs=[-0.1, -0.5, -1.0, -1.0])
    asked = []

    async def under_the_floor(key, request, **kwargs):
        asked.append(request.text)
        return FillResult(fills=[Fill(text="", score=-2.6)], timings=Timings(), model="stub", below_floor=True, partial=[had])

    server.scheduler.fill = under_the_floor

    def type_at_the_cursor(typed: str, version: int) -> None:
        text = SOURCE.replace("y = hel\n", "y = hel" + typed + "\n")
        server.workspace.update_text_document(types.VersionedTextDocumentIdentifier(uri=URI, version=version),
                                              types.TextDocumentContentChangeWholeDocument(text=text))
    try:
        assert await server.fill_at_cursor(URI, types.Position(5, 7), automatic=True) is None and len(asked) == 1
        for n, typed in enumerate(("l", "lo", "lo("), start=2):  # the rest: -2.5, -2.5, -2.0 (< -1.0)
            type_at_the_cursor(typed, n)
            assert await server.fill_at_cursor(URI, types.Position(5, 7 + len(typed)), automatic=True) is None
        assert len(asked) == 1, "no fill ran"
        type_at_the_cursor("lo(1", 5)  # the rest, ", 2)", scores -1.0: not under the floor
        await server.fill_at_cursor(URI, types.Position(5, 11), automatic=True)
        assert len(asked) == 2
        type_at_the_cursor("x", 6)  # the second fill was for "lo(1": this is something else
        await server.fill_at_cursor(URI, types.Position(5, 8), automatic=True)
        assert len(asked) == 3
        type_at_the_cursor("xl", 7)
        server.options, _ = parse_options({**FAST, "minScore": -0.5})  # another floor
        await server.fill_at_cursor(URI, types.Position(5, 9), automatic=True)
        assert len(asked) == 4
    finally:
        server.scheduler.shutdown()
