"""Start-up of the language server, as an editor sees it: ``python -m infill.bench.startup``.

Starts ``python -m infill.lsp`` over stdio (the default model unless ``--model``), sends
``initialize``, ``initialized``, opens a file and asks for an inline completion at once (while
the model loads), then opens a second file and asks again (the first suggestion after opening a
file once the server is up). Prints, in ms from sending ``initialize``: its answer, the
"loaded ..." log message (the end of the load), the first answer, and the second request's
latency; and the gap between the end of the load and the first answer. Then, in a second
server that has loaded its model and sat idle for 2 s, the time from opening a file to the first
answer.
"""

from __future__ import annotations

import argparse
import json
import queue
import subprocess
import sys
import threading
import time

SOURCE = "def mean(values):\n    total = sum(values)\n    return \n"
SECOND = "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n        self.items.\n"


def read_messages(stream, put) -> None:
    """Read Content-Length framed JSON-RPC messages from a language server's ``stream`` (its stdout)
    until it ends, handing each to ``put``. A client's reader: it trusts the server's framing."""
    while True:
        length = None
        while True:
            line = stream.readline()
            if not line:
                return
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
            if line in (b"\r\n", b"\n") and length is not None:
                break
        put(json.loads(stream.read(length)))


class _Client:
    def __init__(self, cmd: list[str], log_path: str | None = None):
        self.log = open(log_path, "ab") if log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        self.inbox: queue.Queue = queue.Queue()
        stamped = lambda message: self.inbox.put((time.perf_counter(), message))  # noqa: E731
        threading.Thread(target=read_messages, args=(self.proc.stdout, stamped), daemon=True).start()

    def send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def wait(self, match, timeout: float = 300.0) -> tuple[float, dict]:
        deadline = time.perf_counter() + timeout
        while True:
            at, message = self.inbox.get(timeout=max(0.01, deadline - time.perf_counter()))
            if match(message):
                return at, message


def measure(model: str | None, device: str, threads: int | None, log_path: str | None = None) -> dict:
    cmd = [sys.executable, "-m", "infill.lsp", "--device", device] + (["-v"] if log_path else [])
    if model:
        cmd += ["--model", model]
    if threads:
        cmd += ["--threads", str(threads)]
    client = _Client(cmd, log_path)
    loaded: list[float] = []
    try:
        t0 = time.perf_counter()
        client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                     "params": {"processId": None, "rootUri": None, "capabilities": {}}})
        t_init, _ = client.wait(lambda m: m.get("id") == 1)
        client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        for i, (uri, text) in enumerate([("file:///startup/a.py", SOURCE), ("file:///startup/b.py", SECOND)]):
            if i == 1:
                t_open = time.perf_counter()
            client.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
                "uri": uri, "languageId": "python", "version": 1, "text": text}}})
            lines = text.split("\n")
            client.send({"jsonrpc": "2.0", "id": 10 + i, "method": "textDocument/inlineCompletion", "params": {
                "textDocument": {"uri": uri}, "position": {"line": len(lines) - 2, "character": len(lines[-2])},
                "context": {"triggerKind": 1}}})

            def answer_or_loaded(m, want=10 + i):
                if m.get("method") == "window/logMessage" and "loaded" in m["params"]["message"]:
                    loaded.append(time.perf_counter())
                return m.get("id") == want and "method" not in m

            at, reply = client.wait(answer_or_loaded)
            items = reply.get("result", {}).get("items", [])
            if i == 0:
                t_first, first_items = at, items
            else:
                t_second, second_items = at, items
        t_load = loaded[0] if loaded else float("nan")
        return {
            "initialize_ms": (t_init - t0) * 1000,
            "load_end_ms": (t_load - t0) * 1000,
            "first_answer_ms": (t_first - t0) * 1000,
            "load_end_to_first_answer_ms": (t_first - t_load) * 1000,
            "first_fill": first_items[0]["insertText"] if first_items else None,
            "second_file_open_to_answer_ms": (t_second - t_open) * 1000,
            "second_fill": second_items[0]["insertText"] if second_items else None,
        }
    finally:
        client.proc.kill()
        client.proc.wait()
        if log_path:
            client.log.close()


def measure_idle(model: str | None, device: str, threads: int | None, settle_s: float = 2.0) -> dict:
    """The first suggestion after opening a file in a server that has loaded its model and sat idle."""
    cmd = [sys.executable, "-m", "infill.lsp", "--device", device] + (["--model", model] if model else []) + (
        ["--threads", str(threads)] if threads else [])
    client = _Client(cmd)
    try:
        client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                     "params": {"processId": None, "rootUri": None, "capabilities": {}}})
        client.wait(lambda m: m.get("id") == 1)
        client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        client.wait(lambda m: m.get("method") == "window/logMessage" and "loaded" in m["params"]["message"])
        time.sleep(settle_s)
        t_open = time.perf_counter()
        client.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": "file:///startup/a.py", "languageId": "python", "version": 1, "text": SOURCE}}})
        client.send({"jsonrpc": "2.0", "id": 2, "method": "textDocument/inlineCompletion", "params": {
            "textDocument": {"uri": "file:///startup/a.py"}, "position": {"line": 2, "character": 11},
            "context": {"triggerKind": 1}}})
        at, reply = client.wait(lambda m: m.get("id") == 2 and "method" not in m)
        items = reply.get("result", {}).get("items", [])
        return {"idle_open_to_first_answer_ms": (at - t_open) * 1000, "fill": items[0]["insertText"] if items else None}
    finally:
        client.proc.kill()
        client.proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infill.bench.startup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a model directory (default: the bundled model)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--server-log", metavar="PATH", help="append the server's log (-v) here")
    args = parser.parse_args(argv)
    for _ in range(args.runs):
        print(json.dumps(measure(args.model, args.device, args.threads, args.server_log)), flush=True)
        print(json.dumps(measure_idle(args.model, args.device, args.threads)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
