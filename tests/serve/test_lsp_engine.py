"""`infill lsp --engine ws://...` as a process: it fills through the engine server, and when that
server is killed and started again the editor is told both (window/showMessage)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time

from infill.bench.startup import read_messages
from infill.serve.server import ServeConfig, ServerThread


class RawClient:
    """Just enough JSON-RPC over stdio to talk to the language server."""

    def __init__(self, cmd: list[str]):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.inbox: queue.Queue = queue.Queue()
        self._id = 0
        threading.Thread(target=read_messages, args=(self.proc.stdout, self.inbox.put), daemon=True).start()

    def send(self, method: str, params, request: bool = True) -> int | None:
        msg = {"jsonrpc": "2.0", "method": method, "params": params}
        rid = None
        if request:
            self._id += 1
            rid = msg["id"] = self._id
        body = json.dumps(msg).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()
        return rid

    def wait(self, pred, timeout: float = 60):
        end = time.monotonic() + timeout
        seen = []
        while time.monotonic() < end:
            try:
                msg = self.inbox.get(timeout=0.1)
            except queue.Empty:
                continue
            seen.append(msg)
            if pred(msg):
                return msg
        raise AssertionError(f"not seen in {timeout} s: {seen[-5:]}")


def shown(text: str):
    return lambda m: m.get("method") == "window/showMessage" and text in m["params"]["message"]


def test_lsp_over_an_engine_server_reconnects_and_tells_the_editor(tiny_engine, tmp_path):
    srv = ServerThread(tiny_engine, ServeConfig(port=0))
    port = srv.serve.port
    client = RawClient([sys.executable, "-m", "infill.lsp", "--engine", srv.url])
    try:
        client.send("initialize", {"processId": None, "rootUri": None, "capabilities": {
            "textDocument": {"inlineCompletion": {}}},
            "initializationOptions": {"maxTokens": 4, "steps": 2, "debounceMs": 0}})
        client.wait(lambda m: m.get("id") == 1)
        client.send("initialized", {}, request=False)
        client.wait(lambda m: m.get("method") == "window/logMessage" and "loaded tiny-test on ws://" in m["params"]["message"])
        uri = (tmp_path / "a.py").as_uri()
        text = "def f(x):\n    return "
        client.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
                    request=False)
        rid = client.send("textDocument/inlineCompletion", {"textDocument": {"uri": uri},
                          "position": {"line": 1, "character": 11}, "context": {"triggerKind": 1}})
        answer = client.wait(lambda m: m.get("id") == rid)
        assert "error" not in answer
        assert srv.serve.metrics.outcomes.labels("result")._value.get() >= 1  # filled by the engine server
        srv.stop()
        client.wait(shown("is unreachable"), timeout=20)
        srv = ServerThread(tiny_engine, ServeConfig(port=port))
        client.wait(shown("reachable again"), timeout=30)
    finally:
        client.proc.kill()
        srv.stop()
