"""The Prometheus figures of every replica of ``infill serve --ray``, served by the front.

Each replica (infill/serve/ray_replica.py) pushes its Prometheus text (the same figures as
``infill serve``: queue depth, batch sizes, step and request times, outcomes) every few seconds
to the metrics board, a small named Ray actor (no CPU reserved) that the front owns. The front's
/metrics (infill/serve/ray_front.py) then serves, in one exposition:

- the front's own figures: ``infill_router_*`` (requests and their outcomes at the front,
  latency including routing, retries after a replica failed, replicas seen);
- every replica's figures, each sample labelled ``replica="<Ray Serve replica id>"``; a replica
  that has not pushed for ``stale_s`` seconds (gone) is left out.

Ray Serve's own figures (``ray_serve_*``: per-replica request counts, queue lengths,
processing latency, replica starts and health) are exported by Ray's metrics agent on each node,
not here (docs/serve-ray.md says where to scrape them).
"""

from __future__ import annotations

import time

BOARD_NAMESPACE = "infill"


class MetricsBoard:
    """Replica name -> (its last Prometheus text, when it came)."""

    def __init__(self):
        self._texts: dict[str, tuple[str, float]] = {}

    def put(self, replica: str, text: str) -> None:
        self._texts[replica] = (text, time.time())

    def drop(self, replica: str) -> None:
        self._texts.pop(replica, None)

    def texts(self, stale_s: float = 15.0) -> dict[str, str]:
        now = time.time()
        for name in [n for n, (_, t) in self._texts.items() if now - t > stale_s]:
            del self._texts[name]
        return {name: text for name, (text, _) in self._texts.items()}


def start_board(name: str):
    """The board actor (owned by the caller: it goes when the front's Ray job ends)."""
    import ray

    return ray.remote(num_cpus=0)(MetricsBoard).options(name=name, namespace=BOARD_NAMESPACE, get_if_exists=True).remote()


def get_board(name: str):
    import ray

    return ray.get_actor(name, namespace=BOARD_NAMESPACE)


class ReplicaFigures:
    """A prometheus_client collector: the families of every replica's text, labelled by replica."""

    def __init__(self, board):
        self.board = board
        self.last: dict[str, str] = {}

    def refresh(self, timeout_s: float = 5.0) -> None:
        import ray

        try:
            self.last = ray.get(self.board.texts.remote(), timeout=timeout_s)
        except Exception:  # noqa: BLE001 -- serve the figures we had
            pass

    def collect(self):
        from prometheus_client.metrics_core import Metric
        from prometheus_client.parser import text_string_to_metric_families
        from prometheus_client.samples import Sample

        families: dict[str, Metric] = {}
        for replica, text in sorted(self.last.items()):
            for fam in text_string_to_metric_families(text):
                if fam.name.endswith("_created"):  # creation times: of no use summed over replicas
                    continue
                out = families.get(fam.name)
                if out is None:
                    out = families[fam.name] = Metric(fam.name, fam.documentation, fam.type, fam.unit)
                out.samples.extend(Sample(s.name, {**s.labels, "replica": replica}, s.value, s.timestamp, s.exemplar)
                                   for s in fam.samples)
        yield from families.values()
