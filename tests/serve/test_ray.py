"""``infill serve --ray`` on a real local Ray cluster (2 CPUs, no dashboard, a 200 MB object
store) with the real default model: language servers through ``--engine`` and two replicas,
document affinity, cancellation reaching the replica, a replica killed under a request, and
replicas added and removed while clients type. Marked ``ray`` (deselected by default; CI runs
``pytest -m ray`` after installing infill[ray])."""

from __future__ import annotations

import argparse
import logging
import re
import signal
import sys
import threading
import time
import urllib.request

import pytest

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray")

from infill.bench.serve import start_server  # noqa: E402
from infill.protocol import FillRequest, Hole, SamplingOptions  # noqa: E402
from infill.serve import protocol as wire  # noqa: E402
from infill.serve.client import EngineClient  # noqa: E402
from infill.serve.server import ServeConfig, ServerThread  # noqa: E402

from .test_lsp_engine import RawClient  # noqa: E402

MODEL_ARGS = argparse.Namespace(model=None, device="cpu", threads=1, precision="fp32", cache_mode="exact", engine=None)
# a fill long enough to be caught running: a 128-token window denoised in 128 steps, one candidate
LONG = SamplingOptions(steps=128, candidates=1, constrained=False, retry=False)
SHORT = SamplingOptions(candidates=1, retry=False)
SOURCE = "import os\n\n\ndef walk(root):\n    for name in os.listdir(root):\n        path = os.path.join(root, name)\n        "


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=200 * 1024 * 1024, log_to_driver=False,
             logging_level=logging.WARNING)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        from ray import serve

        serve.shutdown()
        ray.shutdown()


def replica_results(metrics_text: str, outcome: str = "result") -> dict[str, float]:
    """replica -> its infill_requests_total{outcome=...} in the front's /metrics."""
    out = {}
    for m in re.finditer(r'^infill_requests_total\{outcome="%s",replica="([^"]+)"\} (\S+)$' % outcome, metrics_text, re.M):
        out[m.group(1)] = float(m.group(2))
    return out


def metrics(url: str) -> str:
    return urllib.request.urlopen(url.replace("ws://", "http://") + "/metrics", timeout=30).read().decode()


def request(text: str, path: str, options: SamplingOptions = SHORT, max_tokens: int = 8) -> FillRequest:
    return FillRequest(text=text, holes=[Hole(len(text), len(text), max_tokens)], language="python", path=path,
                       options=options)


def test_language_servers_fill_through_two_replicas(cluster, tmp_path):
    """`infill serve --ray` as a process on the cluster, four `infill lsp --engine` processes typing
    into three documents each: every request is answered, and both replicas fill."""
    cmd = [sys.executable, "-m", "infill.cli", "serve", "--ray", "--address", cluster, "--replicas", "2",
           "--cpus-per-replica", "0.5", "--port", "0", "--device", "cpu", "--threads", "1"]
    proc, url = start_server(cmd, tmp_path / "serve.log", timeout_s=240)
    clients: list[RawClient] = []
    try:
        answers: list[dict] = []
        failures: list[BaseException] = []

        def editor(i: int) -> None:
            try:
                c = RawClient([sys.executable, "-m", "infill.lsp", "--engine", url])
                clients.append(c)
                c.send("initialize", {"processId": None, "rootUri": None,
                                      "capabilities": {"textDocument": {"inlineCompletion": {}}},
                                      "initializationOptions": {"maxTokens": 8, "debounceMs": 0}})
                c.wait(lambda m: m.get("id") == 1, timeout=120)
                c.send("initialized", {}, request=False)
                docs = {(tmp_path / f"e{i}d{j}.py").as_uri(): SOURCE.replace("root", f"root{i}{j}") for j in range(3)}
                for uri, text in docs.items():
                    c.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                                     "text": text}}, request=False)
                for version, typed in enumerate(("r", "e"), start=2):
                    for uri in docs:
                        docs[uri] += typed
                        c.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                          "contentChanges": [{"text": docs[uri]}]}, request=False)
                        lines = docs[uri].split("\n")
                        rid = c.send("textDocument/inlineCompletion", {
                            "textDocument": {"uri": uri}, "context": {"triggerKind": 1},
                            "position": {"line": len(lines) - 1, "character": len(lines[-1])}})
                        answers.append(c.wait(lambda m, rid=rid: m.get("id") == rid, timeout=120))
            except BaseException as e:  # noqa: BLE001
                failures.append(e)

        threads = [threading.Thread(target=editor, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert not failures, failures
        assert len(answers) == 4 * 3 * 2
        assert all("error" not in a and "result" in a for a in answers), [a for a in answers if "error" in a][:3]
        time.sleep(3)  # the replicas push their figures every 2 s
        served = replica_results(metrics(url))
        assert len(served) == 2, served  # both replicas filled
        # every document's first fill came from a replica (later keystrokes may be typed through
        # the language server's cached fill)
        assert sum(served.values()) >= 4 * 3
        end = time.monotonic() + 60  # and Ray Serve's own figures, read from Ray's metrics agent every 5 s
        while "ray_serve_deployment_replica_healthy" not in metrics(url):
            assert time.monotonic() < end
            time.sleep(1)
    finally:
        for c in clients:
            c.proc.kill()
        proc.send_signal(signal.SIGTERM)
        proc.wait(90)
    assert proc.returncode == 0


@pytest.fixture(scope="module")
def front(cluster):
    from infill.serve.ray_front import RayFront, RayOptions

    # 2 to 3 replicas, aiming at one ongoing request each, with short autoscaling delays (Ray
    # Serve's defaults wait 30 s to add and 10 min to remove)
    opts = RayOptions(autoscale=(2, 3), target_ongoing=1, cpus_per_replica=0.5, health_check_s=1.0,
                      autoscaling_overrides={"metrics_interval_s": 0.5, "look_back_period_s": 2.0,
                                             "upscale_delay_s": 1.0, "downscale_delay_s": 3.0})
    f = RayFront(MODEL_ARGS, ServeConfig(port=0), opts)
    srv = ServerThread(None, serve=f)
    try:
        yield f, srv
    finally:
        srv.stop()
        f.delete()


def test_a_document_stays_on_its_replica(front):
    f, srv = front
    client = EngineClient(srv.url)
    try:
        before = len(f.dispatcher.routed)
        for i in range(4):
            for doc in ("file:///a.py", "file:///b.py"):
                assert client.fill(request(SOURCE + "x" * i, doc)).fills
        routed = list(f.dispatcher.routed)[before:]
        for doc in ("file:///a.py", "file:///b.py"):
            assert len({r for d, r in routed if d == doc}) == 1, routed
    finally:
        client.close()


def _connect(url: str):
    from websockets.sync.client import connect

    ws = connect(url, max_size=64 * 1024 * 1024, compression=None)
    assert isinstance(wire.decode_server(ws.recv(timeout=30)), wire.Hello)
    return ws


def _until(ws, pred, timeout: float = 120):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        msg = wire.decode_server(ws.recv(timeout=max(0.1, end - time.monotonic())))
        if pred(msg):
            return msg
    raise AssertionError("no such frame")


def _running_replica(f, timeout: float = 60) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        placed = [r for r in f.dispatcher.placements().values() if r]
        if placed:
            return placed[0]
        time.sleep(0.01)
    raise AssertionError("no request was accepted by a replica")


def test_a_cancel_reaches_the_replica_running_the_request(front):
    f, srv = front
    ws = _connect(srv.url)
    try:
        ws.send(wire.encode(wire.Fill(1, request(SOURCE, "file:///cancel.py", LONG, 128), drafts=1)))
        _until(ws, lambda m: isinstance(m, wire.DraftFrame))  # it is running on a replica
        replica = _running_replica(f)
        before = replica_results(metrics(srv.url), "cancelled").get(replica, 0)
        ws.send(wire.encode(wire.Cancel(1)))
        answer = _until(ws, lambda m: isinstance(m, (wire.Result, wire.Error)) and m.id == 1)
        assert isinstance(answer, wire.Error) and answer.code == wire.CANCELLED
        end = time.monotonic() + 20  # that replica's batcher dropped it as cancelled (its figures come every 2 s)
        while replica_results(metrics(srv.url), "cancelled").get(replica, 0) <= before:
            assert time.monotonic() < end, metrics(srv.url)
            time.sleep(0.5)
    finally:
        ws.close()


def test_a_killed_replica_costs_no_request(front):
    f, srv = front
    ws = _connect(srv.url)
    try:
        retries_before = f.metrics.retries._value.get()
        ws.send(wire.encode(wire.Fill(1, request(SOURCE, "file:///killed.py", LONG, 128), drafts=1)))
        _until(ws, lambda m: isinstance(m, wire.DraftFrame))
        replica = _running_replica(f)
        actors = [a for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].endswith(replica)]
        assert len(actors) == 1, actors
        ray.kill(ray.get_actor(actors[0]["name"], namespace=actors[0]["namespace"]), no_restart=True)
        answer = _until(ws, lambda m: isinstance(m, (wire.Result, wire.Error)) and m.id == 1, timeout=180)
        if isinstance(answer, wire.Result):  # sent again, to the other replica
            assert f.metrics.retries._value.get() == retries_before + 1
            assert len(answer.result.fills) == 1
        else:  # or a clear error frame
            assert answer.code == wire.ENGINE and "replica" in answer.message, answer
        for i in range(2, 6):  # later requests are filled
            ws.send(wire.encode(wire.Fill(i, request(SOURCE, f"file:///after{i}.py"))))
            answer = _until(ws, lambda m, i=i: isinstance(m, (wire.Result, wire.Error)) and m.id == i, timeout=180)
            assert isinstance(answer, wire.Result), answer
    finally:
        ws.close()


def _replica_actors() -> set[str]:
    """The running replicas' actor names (SERVE_REPLICA::<app>#<deployment>#<replica id>)."""
    return {a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith("SERVE_REPLICA::")}


def _wait_for(pred, timeout: float = 90) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.25)


def test_replicas_added_and_removed_while_clients_type(front):
    """Three typists push Ray Serve's autoscaler from 2 replicas to 3 (each opening a new document
    every few keystrokes, so new documents reach the new replica); then two stop, and it goes
    back to 2 while the third types on. Every request is answered."""
    f, srv = front
    stops = [threading.Event() for _ in range(3)]
    results: list[tuple[int, str]] = []
    errors: list[BaseException] = []

    def typist(i: int) -> None:
        client = EngineClient(srv.url)
        text, n = SOURCE, 0
        try:
            while not stops[i].is_set():
                text, n = text + "x", n + 1
                path = f"file:///typist{i}-{n // 5}.py"
                try:
                    client.fill(request(text, path))
                    results.append((i, path))
                except Exception as e:  # noqa: BLE001
                    errors.append(e)
        finally:
            client.close()

    _wait_for(lambda: len(_replica_actors()) == 2)  # the killed one of the test before was replaced
    two = _replica_actors()
    threads = [threading.Thread(target=typist, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    try:
        _wait_for(lambda: len(_replica_actors()) == 3)
        three = _replica_actors()
        assert two < three  # one added; the two running were not restarted
        added = (three - two).pop().rsplit("#", 1)[1]
        _wait_for(lambda: any(r == added for _, r in list(f.dispatcher.routed)), timeout=60)  # and it fills
        stops[1].set()
        stops[2].set()
        _wait_for(lambda: len(_replica_actors()) == 2)  # one removed while typist 0 types on
        count = sum(1 for i, _ in results if i == 0)
        _wait_for(lambda: sum(1 for i, _ in results if i == 0) >= count + 3, timeout=60)
    finally:
        for s in stops:
            s.set()
        for t in threads:
            t.join(120)
    assert not errors, errors[:3]
    assert len(results) >= 10
