"""`infill lsp --engine` and `infill refactor --engine`: the engine client in place of a model."""

from __future__ import annotations

import json
import time

from lsprotocol import types

from infill.cli import main
from infill.lsp.cli import engine_client_loader
from infill.protocol import FillRequest, Hole
from infill.serve.server import ServeConfig, ServerThread


class FakeLanguageServer:
    def __init__(self):
        self.shown = []

    def show_client(self, kind, message):
        self.shown.append((kind, message))


def wait_for(cond, timeout=15):
    end = time.monotonic() + timeout
    while not cond() and time.monotonic() < end:
        time.sleep(0.02)
    return cond()


def test_the_language_servers_engine_reconnects_and_tells_the_editor(tiny_engine):
    srv = ServerThread(tiny_engine, ServeConfig(port=0))
    port = srv.serve.port
    ls = FakeLanguageServer()
    load = engine_client_loader(srv.url, None, {"server": ls})
    engine = load((None, "cpu"))
    try:
        text = "def f(x):\n    return "
        request = FillRequest(text=text, holes=[Hole(len(text), len(text), 4)], language="python")
        assert engine.fill_batch([request])[0].fills and engine.model_id == "tiny-test"
        assert load((None, "cpu")) is engine  # one client per language server
        srv.stop()
        assert wait_for(lambda: ls.shown)
        assert ls.shown[0][0] == types.MessageType.Warning and "unreachable" in ls.shown[0][1]
        engine.backoff_max_s = 0.5
        srv = ServerThread(tiny_engine, ServeConfig(port=port))
        assert wait_for(lambda: len(ls.shown) >= 2, timeout=20)
        assert ls.shown[-1][0] == types.MessageType.Info and "reachable again" in ls.shown[-1][1]
        assert engine.fill_batch([request])[0].fills
    finally:
        engine.close()
        srv.stop()


def test_refactor_with_engine(tiny_engine, tmp_path, capsys):
    srv = ServerThread(tiny_engine, ServeConfig(port=0))
    try:
        src = tmp_path / "a.py"
        src.write_text("def f(x):\n    return <FILL:4>\n")
        rc = main(["refactor", "holes", str(src), "--engine", srv.url, "--json", "--steps", "1", "--candidates", "1"])
        out, err = capsys.readouterr()
        assert rc in (0, 1), err
        rows = [json.loads(line) for line in out.splitlines() if line.strip()]
        assert rows and rows[0]["path"].endswith("a.py")
        assert srv.serve.metrics.outcomes.labels("result")._value.get() >= 1  # the fill went through the server
    finally:
        srv.stop()


def test_refactor_with_an_unreachable_engine_fails_with_one_line(tmp_path, capsys):
    src = tmp_path / "a.py"
    src.write_text("x = <FILL>\n")
    rc = main(["refactor", "holes", str(src), "--engine", "ws://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert rc == 2 and "unreachable" in err


def test_the_engine_client_closes_with_a_normal_handshake(tiny_engine, caplog):
    """Closing an EngineClient closes its websocket first (code 1000), so the server sees a client
    that left, not a broken connection (before: the task was cancelled first, and 1011 came)."""
    import logging

    from infill.serve.client import EngineClient

    srv = ServerThread(tiny_engine, ServeConfig(port=0))
    try:
        client = EngineClient(srv.url)
        assert client.connected.is_set()
        with caplog.at_level(logging.INFO, logger="infill.serve.server"):
            client.close()
            assert wait_for(lambda: not srv.serve.connections, timeout=5)
        assert not [r for r in caplog.records if "went away" in r.getMessage()], caplog.text
    finally:
        srv.stop()
