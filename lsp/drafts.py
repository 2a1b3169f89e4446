"""Streaming drafts (opt-in, the ``drafts`` option): while a ghost-text suggestion is being filled,
its partly denoised fill goes to the editor every N denoising steps as an ``infill/draft``
notification, a diffusion model's "diffusing" view; the editor shows it as ghost text and replaces
it with the final fill (the inlineCompletion result).

(These are the streamed ``infill.protocol.Draft``, not infill/engine/drafts.py's prompt-lookup
guesses for speculative steps.)

Two parts:

- :class:`Relay` carries the engine's drafts from the worker thread, where ``on_draft`` is
  called, to the event loop, as ``asyncio.wrap_future`` carries a result (the scheduler opens one
  per fill that asks for drafts and closes it before that fill's awaiter resumes);
- :class:`CursorDrafts` turns a fill's drafts into notifications for one suggestion at the cursor.

Invariants (what an editor may rely on):

- a draft is sent on the event loop's thread only, in the order the engine made them, with a
  larger ``seq`` each time; every draft of one fill carries the same ``id``, and a newer fill a
  larger one (so an editor drops a draft whose ``id`` is older than one it has seen);
- no draft is sent once its fill is stale (its cancel flag set: a newer request for the same
  place, ``didChange``, ``$/cancelRequest``) or its relay closed (the fill returned, with its
  result or Cancelled): so never after the cancellation, and never after the final result of
  the same request, whose response is written only after the relay was closed;
- a draft shows the hole's text so far as the final fill would be shown (the document's line
  endings, no whitespace-only last line), never a blank one and never the same text twice in a row;
  a draft of a request filled as several holes (a scaffold) is not a preview of its one hole and is
  not sent.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from infill.protocol import Draft

log = logging.getLogger(__name__)

DRAFT_NOTIFICATION = "infill/draft"


class Relay:
    """Drafts from any thread to ``deliver`` on ``loop``'s thread, until closed or ``stale()``.

    :meth:`push` may be called from any thread (the worker's ``on_draft``); :meth:`close` only on
    the loop's thread. ``deliver`` never runs after :meth:`close` returned, nor while ``stale()``:
    both are checked on the loop's thread right before it runs."""

    def __init__(self, loop: asyncio.AbstractEventLoop, deliver: Callable[[Draft], None],
                 stale: Callable[[], bool] = lambda: False):
        self.loop, self.deliver, self.stale = loop, deliver, stale
        self.closed = False

    @property
    def live(self) -> bool:
        return not self.closed and not self.stale()

    def push(self, draft: Draft) -> None:
        if not self.live:  # (checked again on the loop: this read only saves the hand-over)
            return
        try:
            self.loop.call_soon_threadsafe(self._deliver, draft)
        except RuntimeError:  # the loop is closed: the server is going away
            pass

    def _deliver(self, draft: Draft) -> None:
        if not self.live:
            return
        try:
            self.deliver(draft)
        except Exception:  # noqa: BLE001 - a draft is a courtesy; the fill goes on
            log.exception("sending a draft failed")

    def close(self) -> None:
        self.closed = True


class CursorDrafts:
    """The drafts of one suggestion at the cursor as ``infill/draft`` notifications (on the loop).

    ``notify(method, params)`` sends one; ``text_of(fill)`` is the text the final fill would show
    for a fill of the request's hole (the server's ``cursor_text``); ``fill_id``: this fill's number
    (larger for each newer fill); ``uri``, ``version``, ``position`` (an LSP Position): where and
    for which version of the document the suggestion is."""

    def __init__(self, notify: Callable[[str, Any], None], text_of: Callable[[str], str], fill_id: int,
                 uri: str, version: int | None, position: Any):
        self.notify, self.text_of, self.fill_id = notify, text_of, fill_id
        self.where = {"textDocument": {"uri": uri, "version": version},
                      "position": {"line": position.line, "character": position.character}}
        self.seq = 0
        self.last: str | None = None

    def __call__(self, draft: Draft) -> None:
        if len(draft.texts) != 1:
            return
        text = self.text_of(draft.texts[0])
        if not text.strip() or text == self.last:
            return
        self.seq += 1
        self.last = text
        self.notify(DRAFT_NOTIFICATION, {**self.where, "id": self.fill_id, "seq": self.seq, "text": text,
                                         "step": draft.step, "masked": draft.masked})
