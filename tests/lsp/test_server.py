"""End to end over stdio with pytest-lsp: the server answers with the engine's fills."""

from __future__ import annotations

import asyncio
import json

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from infill.protocol import FillRequest, Hole, SamplingOptions

pytestmark = pytest.mark.asyncio(loop_scope="module")

SOURCE = "def add(a, b):\n    return a + b\n\n\nx = add(1, 2)\ny = hel\n"
_versions: dict[str, int] = {}


def open_doc(client: LanguageClient, name: str, text: str, language: str = "python") -> str:
    uri = f"file:///virtual/{name}"
    _versions[uri] = 1
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)))
    return uri


def change_doc(client: LanguageClient, uri: str, text: str) -> None:
    _versions[uri] += 1
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=_versions[uri]),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))


def configure(client: LanguageClient, **options) -> None:
    settings = {**client.init_options, **options}
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"infill": settings}))


STEPS, MAX_TOKENS = 2, 8  # as in conftest.FAST


def expected_fill(engine, text: str, offset: int, max_tokens: int = MAX_TOKENS) -> str:
    request = FillRequest(text=text, holes=[Hole(offset, offset, max_tokens)], language="python", options=SamplingOptions(steps=STEPS, retry=False))  # as the server asks
    return engine.fill(request).fills[0].text


def inline_params(uri: str, line: int, character: int, automatic: bool = False) -> types.InlineCompletionParams:
    kind = types.InlineCompletionTriggerKind.Automatic if automatic else types.InlineCompletionTriggerKind.Invoked
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line, character),
        context=types.InlineCompletionContext(trigger_kind=kind))


async def raw_request(client: LanguageClient, method: str, params):
    """The result as plain JSON (lsprotocol's client-side union structuring mistakes a CodeAction for a Command)."""
    future = client.protocol.send_request(method, params, msg_id=f"raw-{id(params)}")
    client.protocol._result_types.pop(f"raw-{id(params)}", None)
    return await asyncio.wrap_future(future)


async def test_capabilities_advertised(client: LanguageClient):
    caps = client.init_result.capabilities
    assert caps.inline_completion_provider is not None
    assert caps.completion_provider is not None
    assert caps.code_action_provider is not None
    assert {"infill.fillHoles", "infill.recordFeedback"} <= set(caps.execute_command_provider.commands)
    assert client.init_result.server_info.name == "infill"


async def test_model_load_reports_progress(client: LanguageClient):
    for _ in range(300):
        ends = [r for reports in client.progress_reports.values() for r in reports
                if isinstance(r, types.WorkDoneProgressEnd)]
        if ends:
            break
        await asyncio.sleep(0.1)
    assert ends and "loaded tiny-test" in ends[0].message, client.progress_reports
    kinds = [type(r).__name__ for reports in client.progress_reports.values() for r in reports]
    assert kinds[0] == "WorkDoneProgressBegin"


async def test_inline_completion_returns_the_engines_fill(client: LanguageClient, tiny_engine):
    uri = open_doc(client, "inline.py", SOURCE)
    result = await client.text_document_inline_completion_async(inline_params(uri, 5, 7))
    want = expected_fill(tiny_engine, SOURCE, SOURCE.index("hel") + 3)
    assert len(result.items) == 1
    item = result.items[0]
    assert item.insert_text == want
    assert item.range == types.Range(types.Position(5, 7), types.Position(5, 7))
    assert item.command.command == "infill.recordFeedback"


async def test_drafts_stream_before_the_suggestion_when_opted_in(client: LanguageClient, tiny_engine):
    """Issue 27, streaming drafts: with ``drafts`` on, infill/draft notifications for this place
    come before the inlineCompletion result (none after it), and the result is what it is without."""
    drafts = []
    client.feature("infill/draft")(lambda ls, params: drafts.append(params))
    uri = open_doc(client, "drafts.py", SOURCE)
    at = SOURCE.index("hel") + 3
    want = tiny_engine.fill(FillRequest(text=SOURCE, holes=[Hole(at, at, MAX_TOKENS)], language="python",
                                        options=SamplingOptions(steps=8, retry=False))).fills[0].text
    try:
        configure(client, drafts=1, steps=8)
        result = await client.text_document_inline_completion_async(inline_params(uri, 5, 7))
        got = len(drafts)
        await asyncio.sleep(0.3)
        assert len(drafts) == got >= 2, drafts  # every draft came before the result
        assert [d.seq for d in drafts] == list(range(1, got + 1))
        assert all(d.textDocument.uri == uri and d.textDocument.version == 1 and (d.position.line, d.position.character) == (5, 7)
                   and d.text.strip() for d in drafts), drafts
        assert [i.insert_text for i in result.items] == [want]
        configure(client, steps=8)  # off again: the same suggestion, no drafts
        change_doc(client, uri, SOURCE)
        result = await client.text_document_inline_completion_async(inline_params(uri, 5, 7))
        await asyncio.sleep(0.3)
        assert len(drafts) == got and [i.insert_text for i in result.items] == [want]
    finally:
        configure(client)


async def test_completion_returns_the_engines_fill(client: LanguageClient, tiny_engine):
    uri = open_doc(client, "completion.py", SOURCE)
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(5, 7),
        context=types.CompletionContext(trigger_kind=types.CompletionTriggerKind.Invoked)))
    want = expected_fill(tiny_engine, SOURCE, SOURCE.index("hel") + 3)
    (item,) = result.items
    # The edit replaces the word before the cursor, so a completion menu can filter on it.
    assert item.text_edit.new_text == "hel" + want
    assert item.text_edit.range == types.Range(types.Position(5, 4), types.Position(5, 7))


async def test_utf16_positions_crlf_and_tabs(client: LanguageClient, tiny_engine):
    # A line with an emoji (two UTF-16 units) and CJK before the cursor, in a CRLF file with tabs.
    text = "def f():\r\n\ts = '😀中文'  # 😀\r\n\treturn s\r\n"
    uri = open_doc(client, "unicode.py", text)
    line1 = "\ts = '😀中文'  # 😀"
    character = len(line1.encode("utf-16-le")) // 2  # the end of line 1, in UTF-16 units
    result = await client.text_document_inline_completion_async(inline_params(uri, 1, character))
    lf = text.replace("\r\n", "\n")
    want = expected_fill(tiny_engine, lf, lf.index("# 😀") + len("# 😀"))
    assert [i.insert_text for i in result.items] == ([want.replace("\n", "\r\n")] if want.strip() else [])


async def test_fill_holes_returns_one_multi_site_edit(client: LanguageClient, tiny_engine):
    text = "x = '😀'\ndef g(a):\n    b = <FILL>\n    return <FILL:4>\n"
    uri = open_doc(client, "holes.py", text)
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(types.Position(0, 0), types.Position(0, 0)),
        context=types.CodeActionContext(diagnostics=[]))
    (action,) = await raw_request(client, types.TEXT_DOCUMENT_CODE_ACTION, params)
    assert action["kind"] == "refactor.rewrite"
    command = action["command"]
    assert command["command"] == "infill.fillHoles"
    # The tiny random model's fills seldom parse: the edit is refused unless asked for as it is.
    assert await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=command["command"], arguments=command["arguments"])) is None
    edit = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=command["command"], arguments=[{**command["arguments"][0], "allowInvalid": True}]))
    edits = edit["changes"][uri]
    assert [e["range"] for e in edits] == [
        {"start": {"line": 2, "character": 8}, "end": {"line": 2, "character": 14}},
        {"start": {"line": 3, "character": 11}, "end": {"line": 3, "character": 19}},
    ]
    clean = text.replace("<FILL>", "").replace("<FILL:4>", "")
    a = clean.index("b = ") + 4
    b = clean.index("return ") + 7
    request = FillRequest(text=clean, holes=[Hole(a, a, MAX_TOKENS), Hole(b, b, 4)], language="python",
                          options=SamplingOptions(steps=STEPS, retry=False))  # as the server asks
    assert [e["newText"] for e in edits] == [f.text for f in tiny_engine.fill(request).fills]


async def test_fill_holes_in_a_selection_only(client: LanguageClient):
    text = "a = <FILL>\nb = <FILL>\nc = <FILL>\n"
    uri = open_doc(client, "selection.py", text)
    edit = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="infill.fillHoles",
        arguments=[{"uri": uri, "range": {"start": {"line": 1, "character": 0}, "end": {"line": 2, "character": 0}}, "allowInvalid": True}]))
    assert [e["range"]["start"]["line"] for e in edit["changes"][uri]] == [1]


async def test_bad_positions_give_empty_results(client: LanguageClient):
    uri = open_doc(client, "bad.py", SOURCE)
    result = await client.text_document_inline_completion_async(inline_params(uri, 999, 0))
    assert not result.items
    result = await client.text_document_inline_completion_async(inline_params("file:///not/open.py", 0, 0))
    assert not result.items
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(10_000, 10_000)))
    assert not result.items
    # A character past the end of a line means the end of that line (LSP spec): still answered.
    result = await client.text_document_inline_completion_async(inline_params(uri, 5, 500))
    assert [i.range.start for i in result.items] == [types.Position(5, 7)]


async def test_outdated_version_is_dropped(client: LanguageClient):
    # Typing cancels the pending fill (did_change), so this passes even without the outdated-version
    # check in fill_at_cursor; tests/lsp/test_fill_at_cursor.py hits that check itself (issue 25, step 7).
    uri = open_doc(client, "outdated.py", SOURCE)
    configure(client, debounceMs=3000)
    try:
        pending = asyncio.ensure_future(client.text_document_inline_completion_async(inline_params(uri, 5, 7, automatic=True)))
        # The change must come once the server has begun the request (in its debounce): sent at once, both
        # may arrive in one read, and the change, a notification, is applied before the request's task starts.
        await asyncio.sleep(0.5)
        change_doc(client, uri, SOURCE + "# typed\n")  # the user typed on: version 2
        result = await asyncio.wait_for(pending, 30)
        assert not result.items
    finally:
        configure(client)


async def test_cancel_request_stops_denoising(client: LanguageClient, tiny_engine):
    uri = open_doc(client, "cancel.py", SOURCE)
    configure(client, steps=512, maxTokens=512)  # uncancelled, this fill takes far longer than the test
    try:
        await asyncio.sleep(0.2)
        slow = asyncio.ensure_future(client.protocol.send_request_async(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(uri, 5, 7), msg_id="slow-1"))
        await asyncio.sleep(0.5)
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="slow-1"))
        with pytest.raises(JsonRpcException):
            await asyncio.wait_for(slow, 5)
        # A newer request cancels an older one for the same document, too.
        older = asyncio.ensure_future(client.text_document_inline_completion_async(inline_params(uri, 5, 7)))
        await asyncio.sleep(0.5)
        configure(client)
        newer = asyncio.ensure_future(client.text_document_inline_completion_async(inline_params(uri, 4, 3)))
        assert not (await asyncio.wait_for(older, 5)).items
    finally:
        configure(client)
    # The single worker is free again: a normal fill is answered at once.
    result = await asyncio.wait_for(newer, 10)
    assert len(result.items) <= 1


async def test_invalid_options_show_a_message_and_keep_working(client: LanguageClient, tiny_engine):
    configure(client, steps="many", maxTokens=-3, colour="blue")
    try:
        for _ in range(50):
            if any("bad options" in m.message for m in client.messages):
                break
            await asyncio.sleep(0.05)
        text = next(m.message for m in client.messages if "bad options" in m.message)
        assert "steps" in text and "maxTokens" in text and "colour" in text
        uri = open_doc(client, "after-bad-options.py", SOURCE)
        result = await client.text_document_inline_completion_async(inline_params(uri, 5, 7))
        # The bad fields fell back to the defaults (32 tokens, the engine's schedule): still answered.
        assert len(result.items) <= 1
    finally:
        configure(client)


async def test_record_feedback_writes_a_local_file(client: LanguageClient):
    totals = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="infill.recordFeedback", arguments=[{"accepted": True, "kind": "inline", "chars": 5}]))
    totals = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="infill.recordFeedback", arguments=[{"accepted": False, "kind": "inline"}]))
    assert totals == {"accepted": 1, "rejected": 1}
    data = json.loads(client.feedback_file.read_text())
    assert data["by_kind"]["inline"] == {"accepted": 1, "rejected": 1}


async def test_unknown_method_is_an_error_and_the_server_stays_up(client: LanguageClient):
    with pytest.raises(JsonRpcException):
        await client.protocol.send_request_async("infill/noSuchMethod", {})
    result = await client.text_document_inline_completion_async(inline_params("file:///nowhere.py", 0, 0))
    assert not result.items
