"""`infill serve` as a process: SIGTERM cancels what is in flight with an error frame and exits."""

from __future__ import annotations

import signal
import sys

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from infill.bench.serve import start_server
from infill.protocol import FillRequest, Hole, SamplingOptions
from infill.serve import protocol as wire


def test_sigterm_answers_in_flight_requests_and_exits(tiny_model_dir, tmp_path):
    cmd = [sys.executable, "-m", "infill.cli", "serve", "--model", str(tiny_model_dir), "--device", "cpu",
           "--threads", "1", "--port", "0", "--grace", "0.05", "--max-batch", "1"]
    proc, url = start_server(cmd, tmp_path / "server.log", timeout_s=120)
    try:
        with connect(url, open_timeout=30) as ws:
            assert isinstance(wire.decode_server(ws.recv(timeout=30)), wire.Hello)
            text = "def f(x):\n    return "
            request = FillRequest(text=text, holes=[Hole(len(text), len(text), 512)],
                                  options=SamplingOptions(steps=512, constrained=False))
            for i in range(3):
                ws.send(wire.encode(wire.Fill(i, request)))
            ws.send(wire.encode(wire.Fill(9, request), json=True))  # the answers come in JSON from here on
            proc.send_signal(signal.SIGTERM)
            codes = []
            with pytest.raises(ConnectionClosed):
                while True:
                    m = wire.decode_server(ws.recv(timeout=30))
                    if isinstance(m, wire.Error):
                        codes.append((m.id, m.code))
        assert sorted(codes) == [(0, wire.SHUTDOWN), (1, wire.SHUTDOWN), (2, wire.SHUTDOWN), (9, wire.SHUTDOWN)]
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
