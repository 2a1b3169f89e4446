"""LSP's base protocol (``Content-Length`` framed messages), read so that bad framing cannot hurt.

pygls 2.1's read loop (``pygls.io_.run_async``) trusts the stream: ``Content-Length:
99999999999999`` makes it read that many bytes at once (a MemoryError that ends the server), and a
header block without ``Content-Length``, or garbage without a line break, makes it read a body
and the next header as one line, so the stream stays out of step for good while nothing is
logged. :func:`run_framed` is the same loop on top of :class:`FrameReader`, which

- reads in chunks of at most ``CHUNK`` bytes into a buffer that never holds more than one header
  block (``MAX_HEADER_LINE`` x ``MAX_HEADER_LINES``) or one body (``max_length``, 64 MiB) plus a
  chunk;
- accepts ``Name: value`` header lines ending in CRLF (or a bare LF), names in any case, any
  other headers (``Content-Type``) ignored, blank lines between messages skipped;
- answers anything else with a :class:`FrameError`: a header line that is not one, a block
  without ``Content-Length`` or with a bad, conflicting or too large one, a line or block too
  long. The loop answers it like any bad message (a JSON-RPC error with id null, and a log
  line) and the reader **resynchronises**: it drops bytes, in bounded memory, up to the next
  ``Content-Length:`` (the start of the next frame, however the garbage before it ended). A
  body longer than the limit is never read whole: it is skipped this way too, so a length that
  lies cannot swallow the messages after it;
- ends the loop with a logged reason at end of stream (cleanly between messages; inside a
  header block or a body it says so).

The loop (and the server) is never left waiting for bytes a frame cannot have, and a valid
message after any amount of garbage is read and answered.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any, Awaitable, Callable

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from infill.lsp.rpc import BadMessage

log = logging.getLogger(__name__)

MAX_CONTENT_LENGTH = 64 * 1024 * 1024  # the largest body read (the websocket transport's limit too)
MAX_HEADER_LINE = 8 * 1024  # bytes in one header line
MAX_HEADER_LINES = 32  # lines in one header block
CHUNK = 64 * 1024  # bytes asked of the stream at a time

_KEY = b"content-length:"
_HEADER = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*")
_LENGTH = re.compile(rb"[0-9]{1,20}")

Read = Callable[[int], Awaitable[bytes]]  # up to n bytes; b"" at end of stream


class FrameError(BadMessage):
    """A frame that cannot be read; answered with a JSON-RPC error (id null), then skipped."""

    def __init__(self, message: str, code: int = types.ErrorCodes.ParseError):
        super().__init__(None, code, message)


def _show(data: bytes, limit: int = 60) -> str:
    text = repr(bytes(data[:limit]))
    return text + ("..." if len(data) > limit else "")


class FrameReader:
    """Message bodies from a byte stream framed with ``Content-Length`` headers.

    ``await next()`` returns the next body, None at end of stream (``close_reason`` says why if
    the stream ended inside a frame), or raises :class:`FrameError` for a bad frame; the next
    call then first skips to the next frame.
    """

    def __init__(self, read: Read, max_length: int = MAX_CONTENT_LENGTH, chunk: int = CHUNK):
        self._read = read
        self.max_length = max_length
        self.chunk = chunk
        self._buf = bytearray()
        self._eof = False
        self._resync_from: int | None = None  # after an error: skip at least this many bytes, then to the next frame
        self.close_reason: str | None = None
        self.skipped = 0  # bytes dropped while resynchronising
        self.peak = 0  # the largest the buffer has been (for tests: memory stays bounded)

    async def _more(self, want: int | None = None) -> bool:
        """Read more into the buffer; False at end of stream."""
        if self._eof:
            return False
        data = await self._read(min(self.chunk, want) if want else self.chunk)
        if not data:
            self._eof = True
            return False
        self._buf += data
        self.peak = max(self.peak, len(self._buf))
        return True

    def _fail(self, message: str, skip: int, code: int = types.ErrorCodes.ParseError) -> FrameError:
        self._resync_from = skip
        return FrameError(message, code)

    async def _resync(self) -> bool:
        """Drop the bad frame's first bytes, then bytes up to the next ``Content-Length:``;
        False if the stream ends first."""
        skip = min(self._resync_from or 0, len(self._buf))
        self._resync_from = None
        del self._buf[:skip]
        self.skipped += skip
        while True:
            at = bytes(self._buf).lower().find(_KEY)
            if at >= 0:
                del self._buf[:at]
                self.skipped += at
                return True
            drop = max(0, len(self._buf) - (len(_KEY) - 1))  # keep a key split across two reads
            del self._buf[:drop]
            self.skipped += drop
            if not await self._more():
                self.skipped += len(self._buf)
                self._buf.clear()
                return False

    async def _line(self, offset: int) -> tuple[bytes, int] | None:
        """(the line starting ``offset`` bytes into the buffer, without its line ending; its size
        with it); None at end of stream. Nothing is consumed."""
        start = offset
        while True:
            end = self._buf.find(b"\n", start)
            if end >= 0:
                if end - offset > MAX_HEADER_LINE:
                    raise self._fail(f"a header line of more than {MAX_HEADER_LINE} bytes: "
                                     f"{_show(self._buf[offset:])}", 1)
                line = bytes(self._buf[offset:end])
                return (line[:-1] if line.endswith(b"\r") else line), end + 1 - offset
            if len(self._buf) - offset > MAX_HEADER_LINE:
                raise self._fail(f"{MAX_HEADER_LINE} bytes without a line break where a header was due: "
                                 f"{_show(self._buf[offset:])}", 1)
            start = len(self._buf)
            if not await self._more():
                if self._buf:
                    where = "inside a header block" if offset else "with bytes that are not a message"
                    self.close_reason = f"the stream ended {where}: {_show(self._buf)}"
                    self._buf.clear()
                return None

    async def _headers(self) -> int | None:
        """The Content-Length of the next header block (consumed); None at end of stream."""
        length: int | None = None
        lines = 0
        offset = 0  # bytes of this block read so far (consumed once the block is whole)
        while True:
            got = await self._line(offset)
            if got is None:
                return None
            line, size = got
            if not line:
                if lines == 0:  # a blank line between messages: tolerated
                    del self._buf[:size]
                    continue
                del self._buf[: offset + size]
                if length is None:
                    raise self._fail("a header block without Content-Length", 0)
                if length > self.max_length:
                    raise self._fail(f"Content-Length {length} is over the limit of {self.max_length} bytes; "
                                     "the message is skipped", 0, types.ErrorCodes.InvalidRequest)
                return length
            lines += 1
            key = line.lower().find(_KEY)
            if key > 0:  # garbage without a line break, then the next frame's header
                raise self._fail(f"bytes before a header: {_show(line[:key])}", offset + key)
            match = _HEADER.fullmatch(line)
            if match is None:
                raise self._fail(f"not a header line: {_show(line)}", 1)
            if lines > MAX_HEADER_LINES:
                raise self._fail(f"a header block of more than {MAX_HEADER_LINES} lines", 1)
            if match.group(1).lower() == b"content-length":
                value = match.group(2)
                if _LENGTH.fullmatch(value) is None:
                    raise self._fail(f"Content-Length is not a number of bytes: {_show(value)}", 1)
                if length is not None and int(value) != length:
                    raise self._fail("two different Content-Length headers in one block", offset + size)
                length = int(value)
            offset += size

    async def next(self) -> bytes | None:
        """The next message body; None at end of stream; FrameError for a bad frame."""
        if self._resync_from is not None and not await self._resync():
            return None
        length = await self._headers()
        if length is None:
            return None
        while len(self._buf) < length:
            if not await self._more(length - len(self._buf)):
                self.close_reason = f"the stream ended inside a body ({len(self._buf)} of {length} bytes)"
                self._buf.clear()
                return None
        body = bytes(self._buf[:length])
        del self._buf[:length]
        return body


async def run_framed(
    stop_event,
    read: Read,
    protocol: Any,
    logger: logging.Logger | None = None,
    error_handler: Callable[[Exception, type[JsonRpcException]], Any] | None = None,
    max_length: int = MAX_CONTENT_LENGTH,
) -> FrameReader:
    """pygls' ``run_async`` on a :class:`FrameReader`: read, decode and handle messages until the
    stream ends or ``stop_event`` is set. Frame errors go to ``error_handler`` (the server answers
    them); returns the reader (its ``close_reason``)."""
    logger = logger or log
    frames = FrameReader(read, max_length)
    while not stop_event.is_set():
        try:
            body = await frames.next()
        except FrameError as e:
            if error_handler is not None:
                error_handler(e, JsonRpcException)
            else:
                logger.warning("bad frame: %s", e)
            continue
        if body is None:
            if frames.close_reason:
                logger.warning("closing the connection: %s", frames.close_reason)
            else:
                logger.info("the client closed the stream")
            break
        try:
            message = json.loads(body, object_hook=protocol.structure_message)
            protocol.handle_message(message)
        except (BadMessage, ValueError) as exc:  # answered (and logged) by the error handler
            logger.debug("bad message", exc_info=True)
            if error_handler is not None:
                error_handler(exc, JsonRpcException)
        except Exception as exc:  # noqa: BLE001 - as pygls: log it and read on
            logger.exception("Unable to handle message")
            if error_handler is not None:
                error_handler(exc, JsonRpcException)
    return frames


def stdin_reader(stdin, executor=None) -> Read:
    """A :data:`Read` on a binary file (stdin), in ``executor``: returns what one read gives, at most n."""
    read1 = getattr(stdin, "read1", None) or stdin.read

    async def read(n: int) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(executor, read1, n)

    return read
