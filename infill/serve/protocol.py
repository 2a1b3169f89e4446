"""The wire protocol of ``infill serve`` (version 1): msgspec-typed messages, one per websocket frame.

Binary frames are msgpack, text frames JSON (for debugging, e.g. with ``websocat``); the server
answers in the encoding of the client's latest frame. Every message is a map with a ``type`` tag.
docs/serve-protocol.md is the reference; this module imports nothing heavy, so a client can use
it alone.

Client -> server: :class:`Fill` (a request with holes and options, its priority, an optional
draft interval), :class:`Cancel`. Server -> client: :class:`Hello` (once, on connect),
:class:`DraftFrame`, :class:`Result`, :class:`Error`.
"""

from __future__ import annotations

from typing import Literal, Union

import msgspec

from infill.protocol import Draft, FillRequest, FillResult

VERSION = 1
Priority = Literal["interactive", "batch"]

# Error codes (Error.code); docs/serve-protocol.md says when each comes.
BUSY = "busy"  # the queue is full: try again later (nothing was queued)
TOO_MANY = "too_many_in_flight"  # this connection has its maximum of requests in flight
BAD_FRAME = "bad_frame"  # not a message of this protocol (malformed, truncated, unknown type)
BAD_VERSION = "bad_version"
INVALID = "invalid_request"  # the engine rejects the request (holes out of range, ...)
DUPLICATE = "duplicate_id"  # a request with this id is still in flight on this connection
CANCELLED = "cancelled"
SHUTDOWN = "shutting_down"
ENGINE = "engine_error"  # the engine failed on this request
SLOW = "slow_client"  # the client does not read its results; the connection is closed


class Fill(msgspec.Struct, tag="fill", tag_field="type", forbid_unknown_fields=True):
    """Fill ``request``; the answer is a Result (or an Error) with the same ``id``."""

    id: int  # the client's, unique among its requests in flight
    request: FillRequest
    priority: Priority = "interactive"  # interactive (a keystroke) goes ahead of batch work (a refactor)
    drafts: int = 0  # a DraftFrame every this many denoising steps; 0: none
    elastic: bool = False  # may do less work when it joins a busy batch (fewer candidates, then steps; as the
    # language server's inline fills: infill.lsp.scheduler.lighten)
    v: int = VERSION


class Cancel(msgspec.Struct, tag="cancel", tag_field="type", forbid_unknown_fields=True):
    """Cancel request ``id``: it leaves the batch before the next denoising step; an Error with
    code "cancelled" answers it (nothing, if it had already finished)."""

    id: int
    v: int = VERSION


class Hello(msgspec.Struct, tag="hello", tag_field="type"):
    """The server's first frame: the protocol version, the model, and the limits."""

    version: int
    model: str
    languages: list[str] | None = None
    max_batch: int = 0
    max_queue: int = 0
    max_in_flight: int = 0
    max_frame: int = 0


class DraftFrame(msgspec.Struct, tag="draft", tag_field="type"):
    id: int
    draft: Draft


class Result(msgspec.Struct, tag="result", tag_field="type"):
    id: int
    result: FillResult


class Error(msgspec.Struct, tag="error", tag_field="type"):
    id: int | None  # the request's id; None when the error concerns the connection or an unreadable frame
    code: str
    message: str


ClientMessage = Union[Fill, Cancel]
ServerMessage = Union[Hello, DraftFrame, Result, Error]

_mp_enc = msgspec.msgpack.Encoder()
_js_enc = msgspec.json.Encoder()
_client_mp = msgspec.msgpack.Decoder(ClientMessage)
_client_js = msgspec.json.Decoder(ClientMessage)
_server_mp = msgspec.msgpack.Decoder(ServerMessage)
_server_js = msgspec.json.Decoder(ServerMessage)


def encode(message: msgspec.Struct, json: bool = False) -> bytes | str:
    """A frame: msgpack bytes, or JSON text when ``json``."""
    return _js_enc.encode(message).decode() if json else _mp_enc.encode(message)


def decode_client(frame: bytes | str) -> Fill | Cancel:
    """A client's frame (bytes: msgpack, str: JSON); msgspec.DecodeError/ValidationError if not one."""
    return _client_js.decode(frame) if isinstance(frame, str) else _client_mp.decode(frame)


def decode_server(frame: bytes | str) -> Hello | DraftFrame | Result | Error:
    return _server_js.decode(frame) if isinstance(frame, str) else _server_mp.decode(frame)
