"""Bad framing (issue 29): a huge Content-Length, a header block without one, garbage without a
line break, and 10,000 random header and body cases fed to the frame reader directly. Each is
answered (a JSON-RPC error, a logged line) or ends the stream cleanly with a logged reason; the
reader never hangs, never raises, never holds more than a bounded buffer, and finds the valid
message after the garbage."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import threading

import pytest

from infill.lsp.framing import MAX_HEADER_LINE, MAX_HEADER_LINES, FrameError, FrameReader, run_framed

SENTINEL = {"jsonrpc": "2.0", "id": "sentinel", "method": "ping"}


def frame(body: bytes, headers: bytes = b"") -> bytes:
    return headers + b"Content-Length: %d\r\n\r\n" % len(body) + body


def valid(message: dict = SENTINEL) -> bytes:
    return frame(json.dumps(message).encode())


class Stream:
    """An in-memory byte stream read in chunks of random size (1 to ``most`` bytes)."""

    def __init__(self, data: bytes, rng: random.Random | None = None, most: int = 4096):
        self.data, self.at, self.rng, self.most = data, 0, rng, most
        self.largest_ask = 0

    async def read(self, n: int) -> bytes:
        self.largest_ask = max(self.largest_ask, n)
        size = min(n, self.rng.randint(1, self.most) if self.rng else n)
        chunk = self.data[self.at : self.at + size]
        self.at += len(chunk)
        return chunk


class Recorder:
    """A stand-in protocol and error handler: what was handled, what was answered with an error."""

    def __init__(self):
        self.handled: list = []
        self.errors: list[Exception] = []

    def structure_message(self, data):
        return data

    def handle_message(self, message):
        self.handled.append(message)

    def error_handler(self, error, _source):
        self.errors.append(error)


class Captured(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


_LOGGER = logging.getLogger("test_framing.reader")
_LOGGER.propagate = False
_LOGGER.setLevel(logging.DEBUG)
_CAPTURED = Captured()
_LOGGER.addHandler(_CAPTURED)


def logger_capturing() -> tuple[logging.Logger, Captured]:
    """The test's logger, its records cleared."""
    _CAPTURED.records = []
    return _LOGGER, _CAPTURED


async def run(data: bytes, *, rng=None, max_length=1 << 20, chunk=4096):
    recorder = Recorder()
    logger, captured = logger_capturing()
    stream = Stream(data, rng)
    frames = await asyncio.wait_for(run_framed(threading.Event(), stream.read, recorder, logger=logger,
                                               error_handler=recorder.error_handler, max_length=max_length), 10)
    return recorder, frames, captured, stream


def sentinels(recorder: Recorder) -> int:
    return sum(1 for m in recorder.handled if m == SENTINEL)


@pytest.mark.asyncio
async def test_a_huge_content_length_is_refused_and_the_next_message_read():
    recorder, frames, _, stream = await run(b"Content-Length: 99999999999999\r\n\r\n" + valid())
    (error,) = recorder.errors
    assert isinstance(error, FrameError) and error.code == -32600 and "over the limit" in str(error)
    assert sentinels(recorder) == 1
    assert frames.peak < 4096 and stream.largest_ask <= 64 * 1024  # nothing near 99999999999999 is asked for


@pytest.mark.asyncio
async def test_a_body_over_the_limit_is_skipped_in_bounded_memory():
    big = json.dumps({"jsonrpc": "2.0", "method": "x", "params": "a" * 300_000}).encode()
    recorder, frames, _, _ = await run(frame(big) + valid(), max_length=100_000, chunk=4096)
    assert [type(e) for e in recorder.errors] == [FrameError]
    assert sentinels(recorder) == 1 and frames.skipped >= len(big)
    assert frames.peak <= 64 * 1024 + 16  # never the whole body


@pytest.mark.asyncio
async def test_a_header_block_without_content_length_is_answered_and_the_stream_resyncs():
    bad = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + json.dumps(SENTINEL | {"id": 1}).encode()
    recorder, _, _, _ = await run(bad + valid() + valid())
    (error,) = recorder.errors
    assert error.code == -32700 and "without Content-Length" in str(error) and error.msg_id is None
    assert sentinels(recorder) == 2  # the messages after it are read, not the bad one's body


@pytest.mark.asyncio
@pytest.mark.parametrize("garbage", [b"garbage", b"garbage\r", b"\x00\xff{]", b"X-Junk: 1\r\ngarbage", b"\r\n\r\nhello\r\n\r\n"])
async def test_garbage_without_a_line_break_is_answered_and_the_stream_resyncs(garbage):
    recorder, _, _, _ = await run(garbage + valid() + valid())
    assert recorder.errors and all(e.msg_id is None for e in recorder.errors)
    assert sentinels(recorder) == 2


@pytest.mark.asyncio
async def test_the_end_of_the_stream_inside_a_frame_is_a_logged_clean_close():
    for data, reason in [(b"Content-Length: 50\r\n\r\n{\"a\"", "inside a body"),
                         (b"Content-Length: 50\r\nContent-Ty", "inside a header block"),
                         (valid() + b"Content-Len", "not a message")]:
        recorder, frames, captured, _ = await run(data)
        assert reason in frames.close_reason
        assert any(reason in r.getMessage() and r.levelno == logging.WARNING for r in captured.records)


def bad_part(rng: random.Random) -> tuple[bytes, bool, bool]:
    """(bytes, malformed, lies): a random header block and body; ``lies`` if it declares a valid
    length longer than the body it has (it then swallows what follows: nothing can tell), or is
    a header block cut short inside or after a Content-Length line (what follows completes it)."""
    body = rng.choice([
        lambda: bytes(rng.randrange(256) for _ in range(rng.randrange(0, 80))),
        lambda: json.dumps({"jsonrpc": "2.0", "id": rng.randrange(9), "method": "m"}).encode(),
        lambda: b'{"jsonrpc": "2.0", "method": "\xff"}',
        lambda: b"",
    ])()
    declared: int | str | None = len(body)
    kind = rng.randrange(14)
    lies = malformed = False
    if kind == 0:  # a length that does not fit the body
        declared = len(body) + rng.choice([-5, -1, 1, 7, 200])
        if declared < 0:
            declared = 0
    elif kind == 1:  # huge
        declared = rng.choice([10**14, 2**63, 10**19, (1 << 20) + 1])
    elif kind == 2:
        declared = rng.choice(["", "-5", "+5", "5x", "0x10", " ", "1e3", "\xff", "9" * 25, "٣"])
        malformed = True
    elif kind == 3:
        declared = None  # no Content-Length at all
        malformed = True
    lines = []
    if rng.random() < 0.3 or kind == 3:
        lines.append(rng.choice([b"Content-Type: application/vscode-jsonrpc; charset=utf-8", b"X-Junk: \xff\xfe",
                                 b"content-type: x"]))
    if declared is not None:
        name = rng.choice([b"Content-Length", b"content-length", b"CONTENT-LENGTH"])
        sep = rng.choice([b": ", b":", b":  ", b": \t"])
        lines.append(name + sep + (str(declared).encode() if isinstance(declared, (int, str)) else declared))
    if kind == 4:  # not a header line
        lines.insert(rng.randrange(len(lines) + 1), rng.choice([b"garbage", b"no colon here", b": empty name",
                                                               b"bad name: 1", b"\x00\x01"]))
        malformed = True
    elif kind == 5:  # two different lengths
        lines.append(b"Content-Length: %d" % (len(body) + 3))
        malformed = True
    elif kind == 6:  # a very long line, or too many
        lines.insert(0, b"X-Long: " + b"a" * rng.choice([MAX_HEADER_LINE + 1, 3 * MAX_HEADER_LINE]))
        malformed = True
    elif kind == 7:
        lines[:0] = [b"X-N: %d" % i for i in range(MAX_HEADER_LINES + 1)]
        malformed = True
    end = rng.choice([b"\r\n", b"\n"])
    out = b"".join(line + end for line in lines) + end
    if kind == 8:  # garbage without a line break
        out = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))).replace(b"\n", b"") or b"x"
        return out, True, False
    if kind == 9:  # random bytes, line breaks and all (only line breaks: blank lines, harmless)
        out = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
        return out, out.replace(b"\r\n", b"").replace(b"\n", b"") != b"", False
    if kind == 10:  # a header block cut short, then the next frame (an error, or lines that join its block)
        out = out[: rng.randrange(1, max(2, len(out)))]
        return out, False, b"content-length" in out.lower()  # with what follows, it may declare a length
    if kind == 11:  # blank lines between messages
        return rng.choice([b"\r\n", b"\n", b"\r\n\r\n"]), False, False
    lies = kind == 0 and len(body) < declared <= (1 << 20)
    return out + body, malformed, lies


@pytest.mark.asyncio
async def test_framing_fuzzer_10000_cases():
    rng = random.Random(29)
    lying = answered = 0
    for case in range(10_000):
        parts = [bad_part(rng) for _ in range(rng.randint(1, 3))]
        data = b"".join(p[0] for p in parts) + valid()
        lies = any(p[2] for p in parts)
        recorder, frames, captured, stream = await run(data, rng=rng, max_length=1 << 20)  # no hang: wait_for
        where = f"case {case}: {data[:300]!r}"
        assert frames.peak <= MAX_HEADER_LINE * (MAX_HEADER_LINES + 1) + 2 * 4096 + 64, where  # bounded memory
        assert stream.at == len(data), where  # read to the end: never stuck waiting
        closed = bool(frames.close_reason) and any(frames.close_reason in r.getMessage() and r.levelno >= logging.WARNING
                                                   for r in captured.records)
        if any(p[1] for p in parts):
            assert recorder.errors or (lies and closed), where  # an error answer (unless a lie swallowed it)
        for error in recorder.errors:
            assert isinstance(error, (FrameError, ValueError)), where
        if lies:
            lying += 1
            # the swallowed sentinel: read after all, or the lie is seen, or the stream ends inside it (logged)
            assert sentinels(recorder) == 1 or recorder.errors or closed, where
        else:
            assert sentinels(recorder) == 1, where  # the valid message after the garbage is read
            answered += 1
    assert answered > 7000 and lying > 300  # both kinds were exercised


@pytest.mark.asyncio
async def test_the_server_answers_bad_frames_with_json_rpc_errors_and_reads_on():
    from infill.lsp.server import create_server

    server = create_server(loader=lambda key: None)
    written = bytearray()

    class Writer:
        def write(self, data):
            written.extend(data)

        def close(self):
            pass

    server.protocol.set_writer(Writer())
    after = {"jsonrpc": "2.0", "id": "after", "method": "textDocument/hover",
             "params": {"textDocument": {"uri": "file:///a.py"}, "position": {"line": 0, "character": 0}}}
    ping = lambda n: valid({"jsonrpc": "2.0", "id": n, "method": "ping"})  # noqa: E731
    data = (b"garbage" + ping(1) + b"Content-Type: x\r\n\r\n{}" + ping(2)
            + b"Content-Length: 99999999999999\r\n\r\n" + valid(after))
    await asyncio.wait_for(run_framed(threading.Event(), Stream(data).read, server.protocol,
                                      error_handler=server.report_server_error), 10)
    answers = []
    frames = FrameReader(Stream(bytes(written)).read)
    while (body := await frames.next()) is not None:
        answers.append(json.loads(body))
    errors = [(a["id"], a["error"]["code"], a["error"]["message"]) for a in answers]
    assert [e[:2] for e in errors] == [(None, -32700), (1, -32600), (None, -32700), (2, -32600),
                                       (None, -32600), ("after", -32002)]  # every ping and "after" answered
    assert "bytes before a header" in errors[0][2] and "without Content-Length" in errors[2][2]
    assert "over the limit" in errors[4][2]
    server.scheduler.shutdown()
