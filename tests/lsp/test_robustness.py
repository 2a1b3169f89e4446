"""Bad input over raw stdio: requests before initialize, thousands of malformed messages, a 10 MB
document, binary content, a client that vanishes. The server answers what can be answered and
stays up: the valid request at the end is still answered."""

from __future__ import annotations

import json
import queue
import random
import subprocess
import sys
import threading
import time

import pytest

from infill.bench.startup import read_messages

SERVER = [sys.executable, "-m", "infill.lsp", "--device", "cpu", "--threads", "1"]


class RawClient:
    """Content-Length framed JSON-RPC over a server's stdin/stdout, with no opinions."""

    def __init__(self, log_path):
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        self.messages: queue.Queue = queue.Queue()
        self.seen: list[dict] = []
        threading.Thread(target=read_messages, args=(self.proc.stdout, self.messages.put), daemon=True).start()

    def send_bytes(self, body: bytes, headers: bytes = b"") -> None:
        self.proc.stdin.write(headers + b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def send(self, message: dict) -> None:
        self.send_bytes(json.dumps(message).encode())

    def request(self, msg_id, method: str, params=None) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})

    def notify(self, method: str, params=None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def flush(self) -> None:
        self.proc.stdin.flush()

    def wait_for(self, msg_id, timeout: float = 60.0) -> dict:
        """The response to ``msg_id``; every message read is kept in ``seen``."""
        deadline = time.monotonic() + timeout
        while True:
            for message in self.seen:
                if message.get("id") == msg_id and "method" not in message:
                    return message
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no response to {msg_id!r}")
            try:
                self.seen.append(self.messages.get(timeout=left))
            except queue.Empty:
                raise TimeoutError(f"no response to {msg_id!r}") from None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


def malformed_messages(n: int, seed: int = 0) -> list[tuple[bytes, bytes]]:
    """(extra header lines, body) pairs: each body has the right Content-Length, nothing else is right."""
    rng = random.Random(seed)
    methods = ["textDocument/completion", "textDocument/inlineCompletion", "workspace/executeCommand",
               "textDocument/codeAction", "textDocument/didChange", "textDocument/didOpen", "initialize",
               "no/such/method", "$/cancelRequest", "", "x" * 300]
    junk = [None, 1, -1, 2**70, 1.5, "", "s", [], {}, [1, 2], {"a": 1}, True, "\x00", "\ud800"]
    out = []
    for i in range(n):
        kind = rng.randrange(10)
        headers = b""
        if kind == 0:
            body = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 60)))
        elif kind == 1:
            body = json.dumps({"jsonrpc": "2.0", "id": i, "method": rng.choice(methods)}).encode()[: rng.randrange(1, 40)]
        elif kind == 2:
            body = json.dumps(rng.choice(junk)).encode()
        elif kind == 3:
            body = json.dumps({"id": i, "method": rng.choice(methods), "params": {}}).encode()
        elif kind == 4:
            body = json.dumps({"jsonrpc": rng.choice(["1.0", 2, None]), "id": i, "method": rng.choice(methods)}).encode()
        elif kind == 5:
            body = json.dumps({"jsonrpc": "2.0", "id": rng.choice(junk), "method": rng.choice(methods),
                               "params": rng.choice(junk)}).encode()
        elif kind == 6:
            params = {"textDocument": {"uri": rng.choice(junk + ["file:///nope"])},
                      "position": {"line": rng.choice(junk), "character": rng.choice(junk)}}
            body = json.dumps({"jsonrpc": "2.0", "id": i, "method": rng.choice(methods), "params": params}).encode()
        elif kind == 7:
            body = json.dumps({"jsonrpc": "2.0", "method": rng.choice(methods), "params": rng.choice(junk)}).encode()
        elif kind == 8:
            body = b'{"jsonrpc": "2.0", "id": %d, "method": "\xff\xfe", "params": {}}' % i
            headers = b"X-Junk: \xff\r\nContent-Type: nonsense\r\n"
        else:
            body = json.dumps({"jsonrpc": "2.0", "id": i, "result": rng.choice(junk)}).encode()
        out.append((headers, body))
    return out


@pytest.fixture
def raw(tmp_path):
    client = RawClient(tmp_path / "server.log")
    yield client
    client.close()


def initialize(raw: RawClient, tiny_model_dir) -> None:
    options = {"modelPath": str(tiny_model_dir), "device": "cpu", "maxTokens": 8, "steps": 2, "debounceMs": 0}
    raw.request(1, "initialize", {"processId": None, "rootUri": None, "capabilities": {},
                                  "initializationOptions": options})
    raw.flush()
    assert "capabilities" in raw.wait_for(1)["result"]
    raw.notify("initialized", {})


def open_doc(raw: RawClient, uri: str, text: str) -> None:
    raw.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})


def inline(raw: RawClient, msg_id, uri: str, line: int, character: int) -> None:
    raw.request(msg_id, "textDocument/inlineCompletion", {
        "textDocument": {"uri": uri}, "position": {"line": line, "character": character},
        "context": {"triggerKind": 1}})


def test_fuzz_then_a_valid_request_is_answered(raw, tiny_model_dir):
    raw.request("early", "textDocument/completion", {"textDocument": {"uri": "file:///a.py"}, "position": {"line": 0, "character": 0}})
    raw.flush()
    assert raw.wait_for("early")["error"]["code"] == -32002  # ServerNotInitialized
    initialize(raw, tiny_model_dir)
    open_doc(raw, "file:///ok.py", "def add(a, b):\n    return a + b\n")
    for headers, body in malformed_messages(3000):
        raw.send_bytes(body, headers)
    raw.proc.stdin.write(b"garbage header line\r\nContent-Length: nope\r\n\r\n")
    raw.request("unknown", "infill/noSuchMethod", {})
    raw.request("bad-params", "textDocument/completion", {"textDocument": 5})
    inline(raw, "valid", "file:///ok.py", 1, 4)
    raw.flush()
    assert raw.wait_for("unknown", timeout=120)["error"]["code"] == -32601
    assert raw.wait_for("bad-params")["error"]["code"] in (-32602, -32600)
    assert "items" in raw.wait_for("valid")["result"]
    parse_errors = [m for m in raw.seen if m.get("id") is None and m.get("error", {}).get("code") == -32700]
    assert parse_errors  # malformed JSON is answered with a ParseError (id null)
    assert raw.proc.poll() is None


def test_huge_and_binary_documents(raw, tiny_model_dir):
    initialize(raw, tiny_model_dir)
    line = "value = compute(alpha, beta)  # 😀 中文\n"
    huge = line * (10_000_000 // len(line))
    open_doc(raw, "file:///huge.py", huge)
    open_doc(raw, "file:///binary.py", "".join(map(chr, range(0, 0x3000, 7))) + "\ud800\x00\udfff x = ")
    inline(raw, "huge-end", "file:///huge.py", huge.count("\n"), 0)
    inline(raw, "huge-middle", "file:///huge.py", 123_456, 10)
    inline(raw, "binary", "file:///binary.py", 0, 10_000)
    raw.request("holes", "workspace/executeCommand", {"command": "infill.fillHoles", "arguments": [{"uri": "file:///huge.py"}]})
    raw.flush()
    for msg_id in ("huge-end", "huge-middle", "binary", "holes"):
        response = raw.wait_for(msg_id, timeout=120)
        assert "result" in response or "error" in response
    assert "items" in raw.wait_for("huge-end")["result"]
    inline(raw, "after", "file:///huge.py", 10, 5)
    raw.flush()
    assert "items" in raw.wait_for("after", timeout=60)["result"]


def test_a_vanishing_client_ends_the_server_cleanly(raw, tiny_model_dir):
    initialize(raw, tiny_model_dir)
    open_doc(raw, "file:///ok.py", "x = 1\n")
    inline(raw, 5, "file:///ok.py", 0, 5)
    raw.flush()
    raw.proc.stdin.close()  # the editor crashed: no shutdown, no exit
    assert raw.proc.wait(timeout=30) in (0, 1)


def test_bad_framing_then_a_valid_request_is_answered(raw, tmp_path, tiny_model_dir):
    """Issue 29: a huge Content-Length (was: MemoryError, the server died), a header block without
    Content-Length and garbage without a line break (were: the stream out of step for good, every
    later request timed out, nothing logged). Now each gets an error, a log line, and the valid
    request after them is answered."""
    initialize(raw, tiny_model_dir)
    open_doc(raw, "file:///ok.py", "def add(a, b):\n    return a + b\n")
    raw.proc.stdin.write(b"Content-Length: 99999999999999\r\n\r\n")
    raw.request("after-huge", "infill/noSuchMethod", {})
    raw.proc.stdin.write(b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + b'{"jsonrpc": "2.0", "id": "lost"}')
    raw.request("after-block", "infill/noSuchMethod", {})
    raw.proc.stdin.write(b"garbage without a line break")
    inline(raw, "valid", "file:///ok.py", 1, 4)
    raw.flush()
    assert "items" in raw.wait_for("valid", timeout=60)["result"]
    assert raw.wait_for("after-huge")["error"]["code"] == -32601
    assert raw.wait_for("after-block")["error"]["code"] == -32601
    framing = [m["error"]["message"] for m in raw.seen if m.get("id") is None and "error" in m]
    assert any("over the limit" in m for m in framing) and any("without Content-Length" in m for m in framing)
    assert any("bytes before a header" in m for m in framing)
    assert raw.proc.poll() is None
    raw.proc.stdin.close()
    assert raw.proc.wait(timeout=30) in (0, 1)
    log = (tmp_path / "server.log").read_text(errors="replace")
    assert "over the limit" in log and "without Content-Length" in log and "bytes before a header" in log


def test_a_request_sent_right_after_initialize_is_answered(raw, tiny_model_dir):
    """Issue 29: the model loads in the background from initialize; an inline completion sent
    before the load can have ended (importing torch alone takes seconds) waits for it and is answered."""
    options = {"modelPath": str(tiny_model_dir), "device": "cpu", "maxTokens": 8, "steps": 2, "debounceMs": 0}
    raw.request(1, "initialize", {"processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": options})
    raw.notify("initialized", {})
    open_doc(raw, "file:///early.py", "def add(a, b):\n    return a + b\n")
    inline(raw, "early", "file:///early.py", 1, 4)
    raw.flush()
    assert "capabilities" in raw.wait_for(1)["result"]
    assert "items" in raw.wait_for("early", timeout=120)["result"]
