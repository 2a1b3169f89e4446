"""The language server: LSP requests in, ``FillRequest`` to the worker, LSP results out.

Handlers are thin: they read the document at the cursor (``documents``), await the worker
(``scheduler``) and build LSP types. Features:

- ``textDocument/inlineCompletion`` (LSP 3.18): ghost text at the cursor;
- ``textDocument/completion``: the same fill as one completion item, for clients without
  inline completion;
- ``textDocument/codeAction`` + the command ``infill.fillHoles``: every ``<FILL>`` / ``<FILL:N>``
  hole in the document (or the selection) filled jointly in one request, as one WorkspaceEdit;
- the command ``infill.recordFeedback``: local acceptance statistics (``feedback``);
- streaming drafts (opt-in, the ``drafts`` option): ``infill/draft`` notifications with the
  partly denoised ghost text while it is filled (``drafts``).

Errors a user can cause (a missing model, a bad position) give an empty result and a
``window/logMessage``; bad options give a ``window/showMessage`` and the defaults.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from pathlib import Path
from urllib.parse import unquote, urlparse
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from infill.text import textpos
from infill.text.cursor import word_before
from infill.errors import Cancelled, InfillError
from infill.protocol import FillRequest, FillResult, Hole, Partial, SamplingOptions, Snippet
from infill.text import related
from infill.text.files import RELATED_MAX_BYTES

from infill.lsp import documents, feedback
from infill.lsp.drafts import CursorDrafts
from infill.lsp.options import Options, parse_options
from infill.model.declared import bundled_model_dir, declared_languages, declared_min_score
from infill.lsp.rpc import InfillProtocol
from infill.lsp.scheduler import Scheduler

log = logging.getLogger(__name__)

__version__ = "0.1.0"
FILL_HOLES = "infill.fillHoles"
RECORD_FEEDBACK = "infill.recordFeedback"
_EMPTY_INLINE = types.InlineCompletionList(items=[])
_EMPTY_COMPLETION = types.CompletionList(is_incomplete=True, items=[])
_WARM_UP_TEXT = "def mean(values):\n    total = sum(values)\n    return \n"
CURSOR_KINDS = ("inline", "completion")  # fills at the cursor, keyed per request kind
LANGUAGES_NOTIFICATION = "infill/languages"  # {"languages": [...], "languageIds": [...]} once a load ends
RELATED_MAX_DOCUMENTS = 20  # other open documents searched for context lines, at most
RELATED_STICKY_LINES = 16  # context lines chosen for a place stand while the cursor stays this near it


def language_name(language_id: str | None) -> str | None:
    """The language table's name for an LSP language id (``typescriptreact`` -> ``tsx``), else the id."""
    from infill.syntax.languages import spec_for

    spec = spec_for(language_id)
    return spec.name if spec else language_id


def languages_payload(names: tuple[str, ...] | None) -> dict:
    """What clients read (capabilities.experimental.infill and infill/languages): the languages the
    model knows (every language with a grammar if its config.json lists none) and their LSP ids."""
    from infill.syntax.languages import specs

    table = specs()
    names = tuple(names) if names else tuple(table)
    ids: list[str] = []
    for name in names:
        for lsp_id in (table[name].lsp_ids if name in table else (name,)):
            if lsp_id not in ids:
                ids.append(lsp_id)
    return {"languages": list(names), "languageIds": ids}


def completion_snippet(text: str, indent: str) -> str | None:
    """The completion item's text as a snippet (``$``, ``}`` and ``\\`` escaped), its lines after the
    first without the cursor line's ``indent``, which editors add back when they insert a snippet.

    A plain-text item would do for VS Code, but Neovim's omnifunc (vim.lsp.completion, 0.11)
    inserts a plain ``textEdit`` only up to its first blank (``return sku, sku, 0.0,`` became
    ``return``) and cannot insert several lines; it expands a snippet whole. None when a later line
    does not start with ``indent`` (a dedent, an empty line): that fill stays plain text."""
    lines = text.split("\n")
    if any(not line.startswith(indent) or (indent and not line.strip()) for line in lines[1:]):
        return None
    lines[1:] = [line[len(indent):] for line in lines[1:]]
    return "\n".join(lines).replace("\\", "\\\\").replace("$", "\\$").replace("}", "\\}")


def typed_through(offered: tuple[str, int, str] | None, text: str, offset: int) -> str | None:
    """The rest of a suggestion ``offered`` (text, cursor offset, fill) after the user typed its
    start: where ``text`` is that text with the fill's first characters typed at that cursor and
    the cursor after them, the fill's remaining characters (not blank); else None (a pure function)."""
    if offered is None:
        return None
    before, at, fill = offered
    typed = offset - at
    if not 0 < typed < len(fill) or len(text) != len(before) + typed:
        return None
    if text[at:offset] != fill[:typed] or text[:at] != before[:at] or text[offset:] != before[at:]:
        return None
    rest = fill[typed:]
    return rest if rest.strip() else None


def quiet_through(quiet: tuple[str, int, Partial, float] | None, text: str, offset: int, floor: float | None) -> float | None:
    """Where the user typed the start of a fill that stopped under the floor (``quiet``: the text
    it was for, the cursor's offset, what it had written, the floor), the score of its tokens that
    lie wholly after what was typed and before the end of its line; None where that is not so, or
    where that rest is not under ``floor`` (the floor in force now): a fill is then due (a pure
    function).

    The fill would write that rest again after the typed text, each token about as likely as it
    was (the same text before it), then maybe more tokens and its end, each log-probability at
    most 0: its score stays under the floor, so no suggestion would be shown. The sum stops at the
    line's end because a suggestion after code on its line ends there (typing on an empty line puts
    code before the cursor); a token that the typed text or the line break cuts is left out too,
    which errs toward running the model."""
    if quiet is None or floor is None:
        return None
    before, at, partial, was = quiet
    typed = offset - at
    if was != floor or not 0 < typed < len(partial.text) or len(text) != len(before) + typed:
        return None
    if text[at:offset] != partial.text[:typed] or text[:at] != before[:at] or text[offset:] != before[at:]:
        return None
    line_end = partial.text.find("\n", typed)
    line_end = len(partial.text) if line_end < 0 else line_end
    starts = [0, *partial.ends[:-1]]
    rest = sum(lp for start, end, lp in zip(starts, partial.ends, partial.logprobs) if start >= typed and end <= line_end)
    return rest if rest < floor else None


def trim_trailing_blank_line(fill: str, rest_of_line: str) -> str:
    """``fill`` without a last line of only whitespace when nothing follows the cursor on its line:
    accepting it would leave a whitespace-only line (the model wrote the next line's indentation)."""
    if rest_of_line.strip() or "\n" not in fill:
        return fill
    head, _, last = fill.rpartition("\n")
    return head if not last.strip() else fill


def cursor_text(prepared: documents.Prepared, fill: str, text: str, offset: int) -> str:
    """A fill of the hole at ``offset`` in ``text`` as the suggestion shows it: in the document's
    line endings, without a whitespace-only last line (a final fill and its drafts alike)."""
    line_end = text.find("\n", offset)
    return trim_trailing_blank_line(prepared.fill_text(fill), text[offset:] if line_end < 0 else text[offset:line_end])


def load_engine(key: tuple[str | None, str], **settings):
    """The engine for (model directory or None for the bundled one, device), with EngineConfig's
    ``settings`` (precision, threads, cache mode, ...). Runs in the worker."""
    import torch

    from infill.engine.fill import DEFAULT_MODEL_DIR, Engine, EngineConfig

    torch.set_grad_enabled(False)  # thread-local: the worker thread never needs autograd
    path, device = key
    model_dir = Path(path).expanduser() if path else DEFAULT_MODEL_DIR
    return Engine.load(EngineConfig(model_dir=model_dir, device=device, **settings))


class InfillServer(LanguageServer):
    """pygls' server plus the infill state: options, the worker, the loaded model."""

    def __init__(self, model: str | None = None, device: str | None = None, token: str | None = None, loader=load_engine):
        super().__init__("infill", __version__, protocol_cls=InfillProtocol, max_workers=2)
        self.defaults = (model, device or "auto")  # from the command line; options override them
        self.options = Options()
        self.scheduler = Scheduler(loader, warmup=self.warm_up)
        self.protocol.required_token = token
        self._progress_ids = itertools.count(1)
        self._load: tuple[Any, Any] | None = None  # (model key, its load's Future), the latest load started
        self.languages: tuple[str, ...] | None = None  # what the model knows (None: not said; all are served)
        self.model_min_score: float | None = None  # the model's own calibrated floor (config.json's min_score)
        self._refused: set[str] = set()  # languages already told (once per session) that they get no fills
        self.offered: dict[tuple[str, str], tuple[str, int, str]] = {}  # per document and kind of request, the last
        # suggestion at the cursor (the text it was for, the cursor's offset, the fill shown): typing it on needs no fill
        self.quiet: dict[tuple[str, str], tuple[str, int, Partial, float]] = {}  # per document and kind of request, the
        # last fill at the cursor that stopped under the floor (the text, the cursor, what it had written, the floor):
        # typing its start on needs no fill while the rest still scores under the floor (quiet_through)
        self._draft_ids = itertools.count(1)  # each ghost-text fill that streams drafts: its infill/draft "id"
        # Per document, the context snippets last chosen: (the hole's line, the other documents' versions, snippets)
        self._related: dict[str, tuple[int, tuple, list[Snippet]]] = {}

    # -- messages to the user ---------------------------------------------------------------

    def log_client(self, kind: types.MessageType, message: str) -> None:
        (log.warning if kind <= types.MessageType.Warning else log.info)("%s", message)
        self.window_log_message(types.LogMessageParams(type=kind, message=f"infill: {message}"))

    def show_client(self, kind: types.MessageType, message: str) -> None:
        log.warning("%s", message)
        self.window_show_message(types.ShowMessageParams(type=kind, message=f"infill: {message}"))

    def report_server_error(self, error: Exception, source) -> None:
        if self.protocol.answer_bad_message(error):
            return
        log.error("server error (%s): %s", getattr(source, "__name__", source), error)

    # -- options and the model ----------------------------------------------------------------

    def min_score(self) -> float | None:
        """The score under which a cursor suggestion is not shown: the client's minScore, else the model's."""
        return self.options.min_score if self.options.min_score is not None else self.model_min_score

    def model_key(self) -> tuple[str | None, str]:
        return (self.options.model_path or self.defaults[0], self.options.device or self.defaults[1])

    def set_options(self, raw: Any) -> bool:
        """Parse options from the client; True if the model must be (re)loaded."""
        before = self.model_key()
        self.options, problems = parse_options(raw)
        if problems:
            self.show_client(types.MessageType.Warning, "bad options: " + "; ".join(problems))
        changed = self.model_key() != before
        if changed or self.languages is None:
            path = self.model_key()[0]
            model_dir = Path(path).expanduser() if path else bundled_model_dir()
            self.languages, self.model_min_score = declared_languages(model_dir), declared_min_score(model_dir)
            self._refused.clear()
        return changed

    def experimental_capabilities(self) -> dict:
        """``capabilities.experimental`` in the initialize result (lsp/rpc.py adds it)."""
        return {"infill": languages_payload(self.languages)}

    def serves(self, language_id: str | None) -> bool:
        """Whether the model knows this document's language; if not, one notice per language per
        session (window/showMessage) and the caller gives no fill."""
        if not self.languages:
            return True
        name = language_name(language_id)
        if name in self.languages:
            return True
        if name not in self._refused:
            self._refused.add(name)
            model = getattr(self.scheduler.engine, "model_id", None) or "the model"
            self.show_client(types.MessageType.Info,
                             f"no suggestions in {language_id} files: {model} was trained on {', '.join(self.languages)} only")
        return False

    def start_load(self):
        """Start loading the model of the current options in the worker, unless that load is under
        way already (``initialize`` starts it; ``initialized`` reports on it). Its Future."""
        key = self.model_key()
        if self._load is None or self._load[0] != key or _failed(self._load[1]):
            self._load = (key, self.scheduler.load(key))
        return self._load[1]

    def warm_up(self, engine, cancel) -> None:
        """One small Python fill with the current options (runs in the worker after a load)."""
        text = _WARM_UP_TEXT
        at = text.index("return ") + len("return ")
        engine.fill_batch([FillRequest(text=text, holes=[Hole(at, at, self.options.max_tokens)], language="python",
                                       options=self.sampling(cursor=True), path="warm-up.py")], cancel=cancel)

    async def load_model(self) -> None:
        """Load the model in the worker (or follow the load under way), with $/progress if the
        client supports it."""
        future = self.start_load()
        token = None
        caps = self.client_capabilities
        if caps.window and caps.window.work_done_progress:
            token = f"infill-load-{next(self._progress_ids)}"
            try:
                await asyncio.wait_for(self.work_done_progress.create_async(token), 10)
                self.work_done_progress.begin(token, types.WorkDoneProgressBegin(title="infill: loading the model", cancellable=False))
            except Exception as e:  # noqa: BLE001 - progress is a courtesy
                log.info("no progress: %s", e)
                token = None
        message = "model loaded"
        try:
            engine = await asyncio.wrap_future(future)
            known = getattr(getattr(engine, "model", None), "languages", None)
            if known and tuple(known) != self.languages:
                self.languages = tuple(known)
                self._refused.clear()
            # Clients that opened before the load ended learn the model's languages here too.
            self.protocol.notify(LANGUAGES_NOTIFICATION, languages_payload(self.languages))
            dtype = str(getattr(engine, "dtype", "")).removeprefix("torch.")  # test doubles may have none
            message = f"loaded {engine.model_id} on {engine.device}" + (f" ({dtype})" if dtype else "")
            self.log_client(types.MessageType.Info, message)
        except Exception as e:  # noqa: BLE001 - any load failure becomes one message
            message = f"could not load the model: {e}"
            self.show_client(types.MessageType.Error, message)
        finally:
            if token is not None:
                self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))

    def sampling(self, cursor: bool = False) -> SamplingOptions:
        """The fills' options; ``cursor``: a suggestion at the cursor, with cursor_candidates (ghost
        text and the completion list alike, so that the two share one fill) and the floor under which
        it is not shown (:meth:`min_score`), so that the engine may stop a fill once it falls under."""
        o = self.options
        return SamplingOptions(steps=o.steps, threshold=o.threshold, constrained=o.constrained, retry=o.retry,
                               candidates=o.cursor_candidates if cursor else 0,
                               min_score=self.min_score() if cursor else None)

    # -- filling --------------------------------------------------------------------------------

    def document(self, uri: str):
        return self.workspace.text_documents.get(unquote(uri))

    def served_document(self, uri: str, what: str = ""):
        """The open document at ``uri`` if the model serves its language, else None: a document
        that is not open is logged (``what``: the request's name, for the log line), another
        language gets :meth:`serves`' one notice."""
        doc = self.document(uri)
        if doc is None:
            self.log_client(types.MessageType.Warning, f"{what}{uri} is not open")
            return None
        return doc if self.serves(doc.language_id) else None

    def related_context(self, uri: str, doc, prepared) -> list[Snippet]:
        """Lines of the other open documents of ``doc``'s language, the most like the code before
        the first hole (infill/text/related.py), named by their file names; none with
        ``relatedFiles`` off. The choice stands while the hole stays within RELATED_STICKY_LINES
        of where it was made and the other documents are unchanged: the model's cached context
        starts with the snippets, so a new choice costs a whole context's encoding."""
        if not self.options.related_files:
            return []
        others = [d for u, d in list(self.workspace.text_documents.items())
                  if u != doc.uri and d.language_id == doc.language_id and len(d.source) <= RELATED_MAX_BYTES]
        others = others[:RELATED_MAX_DOCUMENTS]
        versions = tuple((d.uri, d.version) for d in others)
        start = prepared.holes[0].start
        line = prepared.text.count("\n", 0, start)
        kept = self._related.get(uri)
        if kept is not None and kept[1] == versions and abs(kept[0] - line) < RELATED_STICKY_LINES:
            return kept[2]
        chosen = related.choose(prepared.text, start, [(Path(unquote(urlparse(d.uri).path)).name or d.uri, d.source)
                                                         for d in others])
        snippets = [Snippet(path, text) for path, text in chosen]
        self._related[uri] = (line, versions, snippets)
        return snippets

    async def run_fill(self, key, request: FillRequest, *, debounce_s: float = 0.0, cache_key=None,
                       elastic: bool = False, on_draft=None) -> FillResult | None:
        """The worker's result, or None (cancelled, superseded, or failed: the reason is logged).
        ``on_draft``: the fill's drafts, every ``drafts`` option steps (Scheduler.fill)."""
        try:
            return await self.scheduler.fill(key, request, debounce_s=debounce_s, cache_key=cache_key, elastic=elastic,
                                             on_draft=on_draft, draft_every=self.options.drafts)
        except Cancelled as e:
            log.debug("fill cancelled: %s", e)
        except InfillError as e:
            self.log_client(types.MessageType.Warning, str(e))
        except Exception as e:  # noqa: BLE001 - a bug must not take the server down
            log.exception("fill failed")
            self.log_client(types.MessageType.Error, f"fill failed: {type(e).__name__}: {e}")
        return None

    async def fill_at_cursor(self, uri: str, position: types.Position, automatic: bool,
                             kind: str = "inline") -> tuple[str, int, str, types.Position] | None:
        """(document text, cursor offset, fill, the cursor clamped to its line) at an LSP position, or None.

        ``kind`` ("inline" or "completion") keys the fill per request kind: an inline and a
        completion request at the same place share one fill instead of cancelling each other."""
        doc = self.served_document(uri)
        if doc is None:
            return None
        text, version = doc.source, doc.version
        encoding = str(self.workspace.position_encoding or "utf-16")
        offset = textpos.lsp_to_str(text, position.line, position.character, encoding)
        if offset is None:
            self.log_client(types.MessageType.Warning, f"position {position.line}:{position.character} is outside {uri}")
            return None
        cursor = types.Position(*textpos.str_to_lsp(text, offset, encoding))
        rest = typed_through(self.offered.get((uri, kind)), text, offset)
        if rest is not None:  # the user typed the start of the last suggestion: the rest of it stands
            self.offered[(uri, kind)] = (text, offset, rest)
            return text, offset, rest, cursor
        under = quiet_through(self.quiet.get((uri, kind)), text, offset, self.min_score())
        if under is not None:  # the user typed the start of a fill that fell under the floor: its rest still does
            log.debug("quiet at %s:%d: typed the start of a fill under the floor, its rest scores %.3f", uri,
                      position.line + 1, under)
            return None
        self.quiet.pop((uri, kind), None)
        prepared = documents.prepare(text, [Hole(offset, offset, self.options.max_tokens)])
        request = FillRequest(text=prepared.text, holes=prepared.holes, language=doc.language_id,
                              options=self.sampling(cursor=True), path=uri, context=self.related_context(uri, doc, prepared))
        debounce = self.options.debounce_ms / 1000 if automatic else 0.0
        on_draft = None
        if kind == "inline" and self.options.drafts:  # ghost text that streams its drafts (infill/draft)
            on_draft = CursorDrafts(self.protocol.notify, lambda fill: cursor_text(prepared, fill, text, offset),
                                    next(self._draft_ids), uri, version, cursor)
        result = await self.run_fill((uri, "cursor", kind), request, debounce_s=debounce, elastic=True,
                                     cache_key=documents.cache_key(prepared.text, prepared.holes[0]), on_draft=on_draft)
        if result is None:
            return None
        t = result.timings
        log.debug("filled %s:%d in %.0f ms (context %.0f, denoise %.0f, constrain %.0f, rank %.0f ms; %d steps, "
                  "%d candidates, %d rounds, %d tokens of %d context): score %.3f, valid %s", uri, position.line + 1,
                  t.total_ms, t.context_ms, t.denoise_ms, t.constrain_ms, t.rank_ms, t.steps, t.candidates, t.rounds,
                  t.tokens_filled, t.context_tokens, result.fills[0].score, result.fills[0].valid)
        if result.below_floor:
            log.debug("stopped a fill under the floor (%.3f) at %s:%d", self.min_score(), uri, position.line + 1)
            if result.partial and self.min_score() is not None:
                self.quiet[(uri, kind)] = (text, offset, result.partial[0], self.min_score())
        if doc.version != version or self.document(uri) is not doc or doc.source != text:
            log.debug("dropping a fill for an outdated version of %s", uri)
            return None
        if result.fills[0].valid is False:  # a fill the engine judged not to parse is never shown
            log.debug("dropping a fill that does not parse at %s:%d", uri, position.line + 1)
            return None
        floor = self.min_score()
        if floor is not None and result.fills[0].score < floor:  # a weak suggestion shown is worse than none
            log.debug("dropping a fill scored %.3f (< %.3f) at %s:%d", result.fills[0].score, floor, uri, position.line + 1)
            return None
        fill = cursor_text(prepared, result.fills[0].text, text, offset)
        if not fill.strip():
            return None
        self.offered[(uri, kind)] = (text, offset, fill)
        return text, offset, fill, cursor

    def fill_holes_edit(self, uri: str, sites, fills: list[str], version: int | None) -> types.WorkspaceEdit:
        doc_text = self.document(uri).source
        encoding = str(self.workspace.position_encoding or "utf-16")

        def pos(offset: int) -> types.Position:
            return types.Position(*textpos.str_to_lsp(doc_text, offset, encoding))

        edits = [types.TextEdit(range=types.Range(pos(s.start), pos(s.end)), new_text=f) for s, f in zip(sites, fills)]
        caps = self.client_capabilities.workspace
        if caps and caps.workspace_edit and caps.workspace_edit.document_changes:
            return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version), edits=edits)])
        return types.WorkspaceEdit(changes={uri: edits})


def _failed(future) -> bool:
    """Whether a load's Future ended without an engine (a later start tries again)."""
    return future.done() and (future.cancelled() or future.exception() is not None)


def _feedback_command(kind: str, model: str, language: str | None, chars: int) -> types.Command:
    arg = {"accepted": True, "kind": kind, "model": model, "chars": chars}
    if language:
        arg["language"] = language
    return types.Command(title="infill: accepted", command=RECORD_FEEDBACK, arguments=[arg])


def _parse_fill_args(args: Any) -> tuple[str, types.Range | None, bool, bool]:
    """``[{"uri", "range"?, "apply"?, "allowInvalid"?}]`` or ``[uri, range?]`` -> (uri, range, apply, allow_invalid)."""
    first = args[0] if isinstance(args, list) and args else None
    allow_invalid = False
    if isinstance(first, dict) and isinstance(first.get("uri"), str):
        rng, apply, allow_invalid = first.get("range"), first.get("apply", True), bool(first.get("allowInvalid", False))
    elif isinstance(first, str):
        rng, apply = (args[1] if len(args) > 1 else None), True
        first = {"uri": first}
    else:
        raise ValueError('expected arguments [{"uri": ..., "range": ...}]')
    if rng is not None:
        from lsprotocol.converters import get_converter

        rng = get_converter().structure(rng, types.Range)
    return first["uri"], rng, bool(apply), allow_invalid


def create_server(model: str | None = None, device: str | None = None, token: str | None = None, loader=load_engine) -> InfillServer:
    """A server with every feature registered (one per process or test)."""
    server = InfillServer(model=model, device=device, token=token, loader=loader)

    @server.feature(types.INITIALIZE)
    def initialize(ls: InfillServer, params: types.InitializeParams) -> None:
        ls.set_options(params.initialization_options)
        ls.start_load()  # in the background: a fill that comes during the load runs as soon as it ends

    @server.feature(types.INITIALIZED)
    async def initialized(ls: InfillServer, params: types.InitializedParams) -> None:
        await ls.load_model()  # progress and the "loaded" message for the load initialize started

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: InfillServer, params: types.DidChangeConfigurationParams) -> None:
        settings = params.settings
        caps = ls.client_capabilities.workspace
        if settings is None and caps and caps.configuration:  # the pull model (VS Code)
            try:
                items = await ls.workspace_configuration_async(types.ConfigurationParams(items=[types.ConfigurationItem(section="infill")]))
                settings = items[0] if items else None
            except Exception as e:  # noqa: BLE001
                log.info("workspace/configuration failed: %s", e)
        if ls.set_options(settings):
            await ls.load_model()

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: InfillServer, params: types.DidChangeTextDocumentParams) -> None:
        for kind in CURSOR_KINDS:  # the cursor moved: stop a stale fill
            ls.scheduler.cancel((params.text_document.uri, "cursor", kind))

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: InfillServer, params: types.DidCloseTextDocumentParams) -> None:
        for kind in CURSOR_KINDS:
            ls.scheduler.cancel((params.text_document.uri, "cursor", kind))
            ls.offered.pop((params.text_document.uri, kind), None)
            ls.quiet.pop((params.text_document.uri, kind), None)
        ls.scheduler.cancel((params.text_document.uri, "holes"))
        ls._related.pop(params.text_document.uri, None)

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(ls: InfillServer, params: types.InlineCompletionParams) -> types.InlineCompletionList:
        automatic = params.context.trigger_kind == types.InlineCompletionTriggerKind.Automatic
        got = await ls.fill_at_cursor(params.text_document.uri, params.position, automatic)
        if got is None:
            return _EMPTY_INLINE
        _, _, fill, cursor = got
        doc = ls.document(params.text_document.uri)
        item = types.InlineCompletionItem(
            insert_text=fill,
            range=types.Range(cursor, cursor),
            command=_feedback_command("inline", ls.scheduler.engine.model_id, doc.language_id, len(fill)),
        )
        return types.InlineCompletionList(items=[item])

    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=["."], resolve_provider=False))
    async def completion(ls: InfillServer, params: types.CompletionParams) -> types.CompletionList:
        automatic = params.context is None or params.context.trigger_kind != types.CompletionTriggerKind.Invoked
        got = await ls.fill_at_cursor(params.text_document.uri, params.position, automatic, kind="completion")
        if got is None:
            return _EMPTY_COMPLETION
        text, offset, fill, cursor = got
        word = word_before(text, offset)
        encoding = str(ls.workspace.position_encoding or "utf-16")
        start = types.Position(cursor.line, cursor.character - textpos.lsp_units(word, encoding))
        first_line = fill.splitlines()[0] if fill.strip() else fill
        label = (word + first_line).strip() + (" …" if "\n" in fill.rstrip("\n") else "")
        doc = ls.document(params.text_document.uri)
        line_start = text.rfind("\n", 0, offset) + 1
        indent = text[line_start:len(text) - len(text[line_start:].lstrip(" \t"))]
        td = ls.client_capabilities.text_document
        item_caps = td.completion.completion_item if td and td.completion else None
        snippet = completion_snippet(word + fill, indent) if item_caps and item_caps.snippet_support else None
        item = types.CompletionItem(
            label=label or fill,
            kind=types.CompletionItemKind.Snippet,
            detail=f"infill ({ls.scheduler.engine.model_id})",
            documentation=word + fill,
            filter_text=word + fill,
            sort_text="0",
            insert_text_format=types.InsertTextFormat.PlainText if snippet is None else types.InsertTextFormat.Snippet,
            text_edit=types.TextEdit(range=types.Range(start, cursor), new_text=word + fill if snippet is None else snippet),
            command=_feedback_command("completion", ls.scheduler.engine.model_id, doc.language_id, len(fill)),
        )
        return types.CompletionList(is_incomplete=True, items=[item])

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.RefactorRewrite], resolve_provider=False),
    )
    def code_action(ls: InfillServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        doc = ls.document(params.text_document.uri)
        if doc is None or "<FILL" not in doc.source:
            return None
        rng = params.range
        whole = rng.start == rng.end
        title = "Fill holes with infill" + ("" if whole else " (selection)")
        arg = {"uri": params.text_document.uri}
        if not whole:
            arg["range"] = ls.protocol._converter.unstructure(rng)
        return [types.CodeAction(title=title, kind=types.CodeActionKind.RefactorRewrite,
                                 command=types.Command(title=title, command=FILL_HOLES, arguments=[arg]))]

    @server.command(FILL_HOLES)
    async def fill_holes(ls: InfillServer, *args: Any) -> types.WorkspaceEdit | None:
        try:
            uri, rng, apply, allow_invalid = _parse_fill_args(list(args))
        except Exception as e:  # noqa: BLE001
            ls.log_client(types.MessageType.Warning, f"{FILL_HOLES}: {e}")
            return None
        doc = ls.served_document(uri, f"{FILL_HOLES}: ")
        if doc is None:
            return None
        text, version = doc.source, doc.version
        encoding = str(ls.workspace.position_encoding or "utf-16")
        start, end = 0, len(text)
        if rng is not None:
            start = textpos.lsp_to_str(text, rng.start.line, rng.start.character, encoding)
            end = textpos.lsp_to_str(text, rng.end.line, rng.end.character, encoding)
            if start is None or end is None or end < start:
                ls.log_client(types.MessageType.Warning, f"{FILL_HOLES}: the range is outside {uri}")
                return None
        try:
            clean, holes, sites = documents.fill_sites(text, start, end, ls.options.max_tokens)
        except InfillError as e:
            ls.show_client(types.MessageType.Warning, str(e))
            return None
        if not holes:
            ls.show_client(types.MessageType.Info, "no <FILL> holes " + ("in the selection" if rng else "in the document"))
            return None
        prepared = documents.prepare(clean, holes)
        request = FillRequest(text=prepared.text, holes=prepared.holes, language=doc.language_id, options=ls.sampling(), path=uri,
                              context=ls.related_context(uri, doc, prepared))
        result = await ls.run_fill((uri, "holes"), request)
        if result is None:
            return None
        if doc.version != version or doc.source != text:
            ls.log_client(types.MessageType.Info, "the document changed while filling; nothing applied")
            return None
        bad = sum(f.valid is False for f in result.fills)
        if bad and not allow_invalid:  # never an edit that leaves the document broken, unless asked (allowInvalid)
            ls.show_client(types.MessageType.Warning, f"{bad} of {len(result.fills)} fills do not parse; nothing applied")
            return None
        edit = ls.fill_holes_edit(uri, sites, [prepared.fill_text(f.text) for f in result.fills], version)
        caps = ls.client_capabilities.workspace
        if apply and caps and caps.apply_edit:
            try:
                await ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label="infill: fill holes"))
            except Exception as e:  # noqa: BLE001 - the edit is also the command's result
                log.info("workspace/applyEdit failed: %s", e)
        return edit

    @server.command(RECORD_FEEDBACK)
    def record_feedback(ls: InfillServer, *args: Any) -> dict | None:
        try:
            event = feedback.parse_event(list(args))
        except ValueError as e:
            ls.log_client(types.MessageType.Warning, f"{RECORD_FEEDBACK}: {e}")
            return None
        path = Path(ls.options.feedback_file).expanduser() if ls.options.feedback_file else feedback.default_path()
        try:
            return feedback.record(path, event)
        except OSError as e:
            ls.log_client(types.MessageType.Warning, f"{RECORD_FEEDBACK}: cannot write {path}: {e}")
            return None

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: InfillServer, params: Any) -> None:
        ls.scheduler.cancel_all()

    return server
