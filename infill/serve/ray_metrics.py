"""The Prometheus figures of every replica of ``infill serve --ray``, served by the front.

Each replica (infill/serve/ray_replica.py) pushes its Prometheus text (the same figures as
``infill serve``: queue depth, batch sizes, step and request times, outcomes) every few seconds
to the metrics board, a small named Ray actor (no CPU reserved) that the front owns. The front's
/metrics (infill/serve/ray_front.py) then serves, in one exposition:

- the front's own figures: ``infill_router_*`` (requests and their outcomes at the front,
  latency including routing, retries after a replica failed, replicas seen);
- every replica's figures, each sample labelled ``replica="<Ray Serve replica id>"``; a replica
  that has not pushed for ``stale_s`` seconds (gone) is left out.

- Ray Serve's own figures (``ray_serve_*``: requests, queue lengths, processing latency, replica
  health and starts, autoscaling targets), read every few seconds from Ray's metrics agent on
  every live node (the port Ray reports for it) and passed on as they are.

It computes no figure of its own and keeps no history: each scrape shows the latest texts.
"""

from __future__ import annotations

import time

BOARD_NAMESPACE = "infill"
RAY_SERVE_PREFIX = "ray_serve_"


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


def merged(texts, label: str | None = None):
    """The metric families of several Prometheus texts as one set of families (one HELP and TYPE
    each); ``texts``: (source, text) pairs, and with ``label`` every sample is labelled with its
    source. Creation-time families (``*_created``) are left out."""
    from prometheus_client.metrics_core import Metric
    from prometheus_client.parser import text_string_to_metric_families
    from prometheus_client.samples import Sample

    families: dict[str, Metric] = {}
    for source, text in texts:
        try:
            parsed = list(text_string_to_metric_families(text))
        except Exception:  # noqa: BLE001 -- an unreadable text costs its own figures only
            continue
        for fam in parsed:
            if fam.name.endswith("_created"):
                continue
            out = families.get(fam.name)
            if out is None:
                out = families[fam.name] = Metric(fam.name, fam.documentation, fam.type, fam.unit)
            extra = {label: source} if label else {}
            out.samples.extend(Sample(x.name, {**x.labels, **extra}, x.value, x.timestamp, x.exemplar) for x in fam.samples)
    return list(families.values())


class ReplicaFigures:
    """A prometheus_client collector: every replica's figures from the board, labelled by replica."""

    def __init__(self, board):
        self.board = board
        self.last: dict[str, str] = {}

    async def refresh(self) -> None:
        self.last = await self.board.texts.remote()

    def collect(self):
        yield from merged(sorted(self.last.items()), "replica")


def ray_serve_only(text: str) -> str:
    """The lines of a Prometheus text that belong to Ray Serve's families (``ray_serve_*``)."""
    keep = []
    for line in text.splitlines():
        name = line.split(" ", 3)[2] if line.startswith("# ") and line.count(" ") >= 2 else line
        if name.startswith(RAY_SERVE_PREFIX):
            keep.append(line)
    return "\n".join(keep) + "\n"


class RayServeFigures:
    """A prometheus_client collector: Ray Serve's own figures, read from the metrics agent of every
    live node of the cluster (its ``MetricsExportPort``; Ray's own labels tell nodes and replicas
    apart)."""

    def __init__(self, timeout_s: float = 5.0):
        self.timeout_s = timeout_s
        self.last: dict[str, str] = {}

    def _read(self) -> dict[str, str]:
        import urllib.request

        import ray

        texts = {}
        for node in ray.nodes():
            if not node.get("Alive") or not node.get("MetricsExportPort"):
                continue
            url = f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
            try:
                texts[url] = ray_serve_only(urllib.request.urlopen(url, timeout=self.timeout_s).read().decode())
            except Exception:  # noqa: BLE001 -- a node's agent not up (yet): its figures are missing
                continue
        return texts

    async def refresh(self) -> None:
        import asyncio

        self.last = await asyncio.to_thread(self._read)

    def collect(self):
        yield from merged(sorted(self.last.items()))
