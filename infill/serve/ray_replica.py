"""One engine replica of ``infill serve --ray``: the Ray Serve deployment's class.

Each replica loads the engine (infill.args.load_engine: the same model options as ``infill
serve``) and runs the existing continuous batcher over it (infill/serve/batcher.py, unchanged):
the requests it is sent join its running batch between denoising steps. :meth:`EngineReplica.fill`
is a streaming method: it submits one request to the batcher and yields its events as
``(kind, payload)`` pairs, ``("accepted", replica)`` first, then ``("draft", Draft)``... and one
``("result", FillResult)`` or ``("error", exception)``. The request's state lives in that call
(its ticket and event queue), so a request and its cancel are on the same replica: when the
front cancels the response stream, Ray Serve cancels the call here and the ``finally`` cancels
the ticket (its rows leave the batch before the next step).

Each replica keeps its own Prometheus figures (the same PromMetrics as ``infill serve``) and
pushes them every ``push_s`` seconds to the metrics board (infill/serve/ray_metrics.py), from
which the front's /metrics serves them with a ``replica`` label.

It does not route, retry, or speak the websocket protocol (infill/serve/ray_front.py does).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import threading

from infill.serve.batcher import Batcher, Busy, ShuttingDown
from infill.serve.server import PromMetrics

log = logging.getLogger(__name__)


def replica_name() -> str:
    """This replica's id in Ray Serve (its unique id), or "local" outside a replica."""
    try:
        from ray import serve

        return serve.get_replica_context().replica_id.unique_id
    except Exception:  # noqa: BLE001 -- not in a replica
        return "local"


class EngineReplica:
    def __init__(self, model_args: argparse.Namespace, max_batch: int, max_queue: int, grace_s: float,
                 board: str | None = None, push_s: float = 2.0):
        from infill.args import load_engine

        self.engine = load_engine(model_args)
        self.metrics = PromMetrics()
        self.batcher = Batcher(self.engine, max_batch, max_queue, self.metrics)
        self.grace_s = grace_s
        self.name = replica_name()
        self._stop = threading.Event()
        if board is not None:
            threading.Thread(target=self._push, args=(board, push_s), name="infill-metrics-push", daemon=True).start()
        log.info("replica %s: %s on %s", self.name, self.engine.model_id, self.engine.device)

    def info(self) -> dict:
        languages = getattr(self.engine.model, "languages", None)
        return {"model": self.engine.model_id, "languages": list(languages) if languages else None,
                "replica": self.name, "device": str(self.engine.device)}

    async def fill(self, request, priority: str = "interactive", drafts: int = 0, elastic: bool = False):
        loop = asyncio.get_running_loop()
        events: asyncio.Queue = asyncio.Queue()

        def emit(kind, payload) -> None:  # on the batcher's thread
            loop.call_soon_threadsafe(events.put_nowait, (kind, payload))

        try:
            ticket = self.batcher.submit(request, emit, priority, drafts, elastic)
        except (Busy, ShuttingDown) as e:
            yield ("error", e)
            return
        try:
            yield ("accepted", self.name)
            while True:
                kind, payload = await events.get()
                yield (kind, payload)
                if kind != "draft":
                    return
        finally:
            if not ticket.finished:  # the caller went away or cancelled: leave the batch
                self.batcher.cancel(ticket)

    def check_health(self) -> None:
        """Ray Serve's health check: a replica whose batch loop died is restarted."""
        if not self.batcher.alive:
            raise RuntimeError("the batch loop has stopped")

    def __del__(self) -> None:
        self._stop.set()
        try:
            self.batcher.drain(self.grace_s)
        except Exception:  # noqa: BLE001
            pass

    def _push(self, board_name: str, every_s: float) -> None:
        from infill.serve.ray_metrics import get_board

        board = None
        while not self._stop.wait(every_s):
            try:
                board = board or get_board(board_name)
                board.put.remote(self.name, self.metrics.text().decode())
            except Exception as e:  # noqa: BLE001 -- metrics never stop the replica
                log.debug("metrics push failed: %s", e)
                board = None
