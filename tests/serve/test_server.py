"""infill serve over a real websocket, with the tiny model (tests/conftest.py): batching across
clients, busy, cancel, drafts, faults, security, and the engine client's reconnects."""

from __future__ import annotations

import json
import random
import sys
import threading
import time
import urllib.error
import urllib.request

import msgspec
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from infill.protocol import FillRequest, Hole, SamplingOptions
from infill.serve import protocol as wire
from infill.serve.server import ServeConfig, ServerThread

CODE = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    "


def fill(rid: int, n: int = 8, priority: str = "interactive", drafts: int = 0, **opts) -> wire.Fill:
    opts.setdefault("constrained", False)
    request = FillRequest(text=CODE, holes=[Hole(len(CODE), len(CODE), n)], language="python",
                          options=SamplingOptions(**opts))
    return wire.Fill(rid, request, priority, drafts)


@pytest.fixture
def server(tiny_engine):
    servers = []

    def start(**kw) -> ServerThread:
        s = ServerThread(tiny_engine, ServeConfig(port=kw.pop("port", 0), **kw))
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


def open_client(srv, **kw):
    ws = connect(srv.url, open_timeout=10, legacy=True, **kw)
    hello = wire.decode_server(ws.recv(timeout=10))
    assert isinstance(hello, wire.Hello) and hello.version == wire.VERSION and hello.model == "tiny-test"
    return ws


def until_final(ws, rid, timeout=60):
    """Frames up to and including request ``rid``'s Result or Error."""
    frames = []
    end = time.monotonic() + timeout
    while True:
        msg = wire.decode_server(ws.recv(timeout=max(0.1, end - time.monotonic())))
        frames.append(msg)
        if isinstance(msg, (wire.Result, wire.Error)) and msg.id == rid:
            return frames


def idle(srv, timeout=20):
    end = time.monotonic() + timeout
    b = srv.serve.batcher
    while (b.live or b.queued) and time.monotonic() < end:
        time.sleep(0.01)
    return b.live == 0 and b.queued == 0 and b.stepper.live_rows == 0


def test_protocol_round_trips_msgpack_and_json():
    msgs = [fill(3, drafts=2, steps=4), wire.Cancel(3), wire.Hello(1, "m", ["python"], 1, 2, 3, 4),
            wire.Error(None, wire.BAD_FRAME, "x"), wire.DraftFrame(1, wire.Draft(step=2, texts=["a"], masked=3))]
    for m in msgs:
        for as_json in (False, True):
            frame = wire.encode(m, json=as_json)
            decode = wire.decode_client if isinstance(m, (wire.Fill, wire.Cancel)) else wire.decode_server
            assert decode(frame) == m
    assert json.loads(wire.encode(wire.Cancel(7), json=True)) == {"type": "cancel", "id": 7, "v": 1}
    with pytest.raises(msgspec.ValidationError):
        wire.decode_client('{"type": "fill", "id": 1}')


def test_a_fill_and_json_frames(server):
    srv = server()
    with open_client(srv) as ws:
        ws.send(wire.encode(fill(1)))
        frames = until_final(ws, 1)
        assert isinstance(frames[-1], wire.Result) and len(frames[-1].result.fills) == 1
        ws.send(wire.encode(fill(2), json=True))
        reply = ws.recv(timeout=30)
        assert isinstance(reply, str) and json.loads(reply)["type"] == "result"


def test_two_clients_share_one_model_call(server):
    srv = server()
    stepper = srv.serve.batcher.stepper
    calls = []
    real = stepper._model_call

    def spy(going):
        calls.append({s.request.options.seed for s in going})
        return real(going)

    stepper._model_call = spy
    with open_client(srv) as a, open_client(srv) as b:
        a.send(wire.encode(fill(1, n=32, steps=32, seed=1)))
        b.send(wire.encode(fill(1, n=32, steps=32, seed=2)))
        ra, rb = until_final(a, 1)[-1], until_final(b, 1)[-1]
    assert isinstance(ra, wire.Result) and isinstance(rb, wire.Result)
    assert any(c == {1, 2} for c in calls), calls  # rows of both clients in one model call


def test_busy_when_the_queue_is_full(server):
    srv = server(max_batch=1, max_queue=2, max_in_flight=64)
    with open_client(srv) as ws:
        for i in range(12):
            ws.send(wire.encode(fill(i, n=32, steps=32)))
        errors, results = [], []
        while len(errors) + len(results) < 12:
            m = wire.decode_server(ws.recv(timeout=60))
            (results if isinstance(m, wire.Result) else errors).append(m)
    assert errors and all(e.code == wire.BUSY and "busy" in e.message for e in errors)
    # The queue holds two; the first request may still wait there (not yet in the batch) when the
    # others arrive, so at least the queue's two are served.
    assert len(results) >= 2 and len(errors) <= 10


def test_per_connection_in_flight_limit_and_duplicate_ids(server):
    srv = server(max_in_flight=2, max_batch=1)
    with open_client(srv) as ws:
        for i in (1, 2, 2, 3):
            ws.send(wire.encode(fill(i, n=32, steps=32)))
        got = {}
        while sum(map(len, got.values())) < 4:
            m = wire.decode_server(ws.recv(timeout=60))
            if isinstance(m, wire.Error):
                got.setdefault(m.code, []).append(m.id)
            else:
                got.setdefault("result", []).append(m.id)
    assert got[wire.DUPLICATE] == [2] and got[wire.TOO_MANY] == [3] and sorted(got["result"]) == [1, 2]


def test_cancel_takes_effect_within_one_step_and_rows_leave(server):
    srv = server()
    batcher = srv.serve.batcher
    at_cancel = []
    real_cancel = batcher.cancel

    def spy(ticket):
        at_cancel.append(batcher.steps)
        real_cancel(ticket)

    batcher.cancel = spy
    with open_client(srv) as ws:
        ws.send(wire.encode(fill(1, n=64, steps=64, drafts=1)))
        first = wire.decode_server(ws.recv(timeout=30))
        assert isinstance(first, wire.DraftFrame)
        ws.send(wire.encode(wire.Cancel(1)))
        frames = until_final(ws, 1)
        steps_at_error = batcher.steps
    assert isinstance(frames[-1], wire.Error) and frames[-1].code == wire.CANCELLED
    assert steps_at_error - at_cancel[0] <= 1  # at most the step that was running
    assert idle(srv)


def test_drafts_stream_before_the_result(server):
    srv = server()
    with open_client(srv) as ws:
        ws.send(wire.encode(fill(5, n=16, steps=8, drafts=2)))
        frames = until_final(ws, 5)
    drafts = [f for f in frames if isinstance(f, wire.DraftFrame)]
    assert [d.draft.step for d in drafts] == [2, 4, 6] and isinstance(frames[-1], wire.Result)
    assert drafts[0].draft.masked > drafts[-1].draft.masked


def test_interactive_requests_go_ahead_of_batch_work(server):
    srv = server(max_batch=1, max_in_flight=64)
    with open_client(srv) as ws:
        ws.send(wire.encode(fill(0, n=32, steps=32)))  # running
        for i in range(1, 4):
            ws.send(wire.encode(fill(i, priority="batch", n=8, steps=4)))
        ws.send(wire.encode(fill(9, priority="interactive", n=8, steps=4)))
        order = []
        while len(order) < 5:
            m = wire.decode_server(ws.recv(timeout=60))
            order.append(m.id)
    assert order.index(9) < order.index(1), order


def test_a_client_disconnecting_mid_request(server):
    srv = server()
    ws = open_client(srv)
    ws.send(wire.encode(fill(1, n=64, steps=64)))
    time.sleep(0.05)
    ws.close()
    assert idle(srv)
    with open_client(srv) as other:  # the others are served on
        other.send(wire.encode(fill(1)))
        assert isinstance(until_final(other, 1)[-1], wire.Result)


def test_malformed_truncated_and_oversized_frames(server):
    srv = server(max_frame=64 * 1024)
    with open_client(srv) as ws:
        good = wire.encode(fill(1))
        for bad in (b"\xc1\xc1garbage", good[: len(good) // 2], '{"type": "fill", "id": 1', '{"type": "nope", "id": 1}',
                    wire.encode(wire.Fill(2, FillRequest(text="x", holes=[]))), b""):
            ws.send(bad)
            m = wire.decode_server(ws.recv(timeout=10))
            assert isinstance(m, wire.Error), m
            assert m.code in (wire.BAD_FRAME, wire.INVALID), m
        ws.send(wire.encode(fill(3)))  # still served
        assert isinstance(until_final(ws, 3)[-1], wire.Result)
    with open_client(srv) as ws:
        ws.send(b"\x00" * (128 * 1024))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
        assert closed.value.rcvd.code == 1009  # message too big
    with open_client(srv) as ws:
        ws.send(wire.encode(fill(4)))
        assert isinstance(until_final(ws, 4)[-1], wire.Result)


def test_a_slow_client_that_never_reads_is_disconnected(server):
    srv = server(send_queue=8, max_in_flight=64)
    with open_client(srv) as ws:
        time.sleep(0.1)
        (conn,) = srv.serve.connections
        conn.ws.send = _never_returns  # a client that never reads: the server's sends never complete
        for i in range(40):
            ws.send(wire.encode(fill(i, n=8, steps=4)))
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                ws.recv(timeout=20)
        assert closed.value.rcvd is None or closed.value.rcvd.code == 1008
    assert idle(srv)
    with open_client(srv) as ws:
        ws.send(wire.encode(fill(1)))
        assert isinstance(until_final(ws, 1)[-1], wire.Result)


async def _never_returns(*args, **kwargs):
    import asyncio

    await asyncio.Event().wait()


def test_a_thousand_requests_with_random_cancels(server):
    srv = server(max_in_flight=32, max_queue=1024)
    rng = random.Random(0)
    t0 = time.monotonic()
    outcomes = {}
    clients = [open_client(srv) for _ in range(4)]

    def run(ws, base):
        pending = set()
        for i in range(250):
            rid = base + i
            ws.send(wire.encode(fill(rid, n=rng.choice([2, 4, 8]), steps=rng.choice([1, 2, 4]))))
            pending.add(rid)
            if rng.random() < 0.3:
                ws.send(wire.encode(wire.Cancel(rng.choice(sorted(pending)))))
            while len(pending) >= 24:
                m = wire.decode_server(ws.recv(timeout=60))
                if isinstance(m, (wire.Result, wire.Error)):
                    outcomes[m.id] = m
                    pending.discard(m.id)
        while pending:
            m = wire.decode_server(ws.recv(timeout=60))
            if isinstance(m, (wire.Result, wire.Error)):
                assert m.id not in outcomes
                outcomes[m.id] = m
                pending.discard(m.id)

    threads = [threading.Thread(target=run, args=(ws, k * 1000)) for k, ws in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(240)
    for ws in clients:
        ws.close()
    assert len(outcomes) == 1000
    kinds = {type(m).__name__ if isinstance(m, wire.Result) else m.code for m in outcomes.values()}
    assert kinds <= {"Result", wire.CANCELLED}, kinds
    assert idle(srv) and not srv.serve.batcher.stepper.slots and not srv.serve.batcher._slots
    time.sleep(0.1)
    assert srv.serve.batcher.stepper._base is None  # no encoded context kept alive either
    import gc

    from infill.engine.stepper import Slot
    from infill.serve.batcher import Ticket

    gc.collect()
    alive = [o for o in gc.get_objects() if type(o) in (Slot, Ticket)]
    # none of the 1,000 requests' states is kept: at most the last step's, still named by the worker's locals
    assert len(alive) <= 16, len(alive)
    assert time.monotonic() - t0 < 240


def test_token_and_origin_checks(server):
    srv = server(token="s3cret", allowed_origins={"https://ok.example"})
    with pytest.raises(InvalidStatus) as e:
        connect(srv.url, open_timeout=10)
    assert e.value.response.status_code == 401
    with pytest.raises(InvalidStatus) as e:
        connect(srv.url + "?token=wrong", open_timeout=10)
    assert e.value.response.status_code == 401
    with pytest.raises(InvalidStatus) as e:
        connect(srv.url + "?token=s3cret", origin="https://evil.example", open_timeout=10)
    assert e.value.response.status_code == 403
    with open_client(srv, additional_headers={"Authorization": "Bearer s3cret"}, origin="https://ok.example") as ws:
        ws.send(wire.encode(fill(1)))
        assert isinstance(until_final(ws, 1)[-1], wire.Result)
    http = srv.url.replace("ws://", "http://")
    health = json.loads(urllib.request.urlopen(http + "/health", timeout=10).read())
    assert health["status"] == "ok" and health["model"] == "tiny-test"
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(http + "/metrics", timeout=10)
    assert e.value.code == 401
    metrics = urllib.request.urlopen(http + "/metrics?token=s3cret", timeout=10).read().decode()
    for name in ("infill_queue_depth", "infill_batch_rows", "infill_step_seconds", "infill_request_seconds"):
        assert name in metrics
    if sys.platform.startswith("linux"):
        assert "process_resident_memory_bytes" in metrics  # what infill bench serve reports as the server's memory


def test_stop_cancels_in_flight_requests_with_an_error_frame(server):
    srv = server(grace_s=0.2, max_batch=1, max_in_flight=64)
    with open_client(srv) as ws:
        for i in range(4):
            ws.send(wire.encode(fill(i, n=512, steps=512)))
        time.sleep(0.2)
        t = threading.Thread(target=srv.stop)
        t.start()
        codes = []
        try:
            while True:
                m = wire.decode_server(ws.recv(timeout=20))
                if isinstance(m, wire.Error):
                    codes.append(m.code)
        except ConnectionClosed as e:
            assert e.rcvd is not None and e.rcvd.code == 1001
        t.join(20)
        assert not t.is_alive()
    assert codes and set(codes) <= {wire.SHUTDOWN}


def test_the_engine_client_reconnects_and_says_so(server, tiny_engine):
    from infill.serve.client import EngineClient, EngineUnavailable

    srv = server()
    port = srv.serve.port
    said = []
    client = EngineClient(srv.url, on_status=lambda kind, msg: said.append((kind, msg)), backoff_max_s=0.5)
    try:
        request = fill(0).request
        assert client.fill(request).fills and client.model_id == "tiny-test"
        srv.stop()
        end = time.monotonic() + 10
        while not said and time.monotonic() < end:
            time.sleep(0.02)
        assert said and said[0][0] == "down" and "unreachable" in said[0][1]
        with pytest.raises(EngineUnavailable):
            client.fill(request)
        server(port=port)  # restarted on the same port
        assert client.connected.wait(15)
        assert said[-1][0] == "up" and "reachable again" in said[-1][1]
        assert client.fill(request).fills
    finally:
        client.close()


def test_an_elastic_request_does_less_in_a_busy_batch(server):
    srv = server()
    with open_client(srv) as ws:
        ws.send(wire.encode(fill(1, n=64, steps=64)))
        end = time.monotonic() + 10
        while not srv.serve.batcher.live and time.monotonic() < end:
            time.sleep(0.005)
        rigid, elastic = fill(2), fill(3)
        ws.send(wire.encode(rigid))
        ws.send(wire.encode(msgspec.structs.replace(elastic, elastic=True)))
        results = {}
        while len(results) < 3:
            m = wire.decode_server(ws.recv(timeout=30))
            results[m.id] = m
    assert results[2].result.timings.candidates == 2  # the engine's default
    assert results[3].result.timings.candidates == 1  # lightened: it joined a busy batch
