"""``infill serve --ray``: many engine replicas on Ray Serve behind one websocket endpoint.

The front is ``infill serve``'s own websocket server (infill/serve/server.py: the same protocol,
token, Origin, frame and in-flight limits, health, shutdown), with the local batcher replaced by
:class:`RayDispatcher`: each ``fill`` is sent through a Ray Serve deployment handle, as a stream
(``stream=True``), to one replica of the deployment (infill/serve/ray_replica.py, which runs the
unchanged batcher and engine), and its events (drafts, then a result or an error) come back
through that stream. Routing is by document (infill/serve/ray_router.py: the replica that served
the document last, else the least loaded). A ``cancel`` cancels the request's stream, which Ray
Serve delivers to the replica running it. When a replica dies under a request (killed, its node
lost), the request is sent again, to another replica, up to ``retries`` times; after that its
client gets an ``engine_error`` frame that says so. The figures at /metrics: the front's
``infill_router_*``, every replica's, and Ray Serve's own (infill/serve/ray_metrics.py).

The deployment: ``--replicas N`` fixed, or ``--autoscale MIN:MAX`` (Ray Serve's autoscaler on
ongoing requests per replica); ``--gpus-per-replica G`` and ``--cpus-per-replica C`` reserve Ray
resources for each. ``--address`` joins a running Ray cluster; without it a local one is started
(no dashboard, a 256 MiB object store). Ray Serve's HTTP proxy is not started: the front is the
only way in. It does not run the model itself.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from infill.errors import Cancelled, InfillError
from infill.serve.batcher import Busy, ShuttingDown
from infill.serve.server import InfillServe, ServeConfig, config_from_args, run_until_signalled

log = logging.getLogger(__name__)

INSTALL_HINT = "infill serve --ray needs Ray Serve: pip install 'infill[ray]'"
APP_NAME = "infill"
DEPLOYMENT_NAME = "infill-engine"
LOCAL_OBJECT_STORE_BYTES = 256 * 1024 * 1024


class ReplicaFailed(InfillError):
    """The replica running a request died, and so did the retries (an engine_error frame)."""


def ray_available() -> bool:
    """Ray Serve can be imported (the extra infill[ray] is installed)."""
    try:
        import ray.serve  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class RayOptions:
    replicas: int = 1
    autoscale: tuple[int, int] | None = None  # (min, max) replicas
    gpus_per_replica: float = 0.0
    cpus_per_replica: float = 1.0
    address: str | None = None  # a running cluster; None: start a local one
    retries: int = 1  # a request whose replica died is sent again this many times
    imbalance: int = 8  # the router leaves a document's replica when its queue is this much longer
    target_ongoing: float | None = None  # autoscaling: ongoing requests per replica it aims at
    autoscaling_overrides: dict | None = None  # more of Ray Serve's AutoscalingConfig (delays, windows)
    health_check_s: float = 2.0
    app: str = APP_NAME


def model_arguments(args: argparse.Namespace) -> argparse.Namespace:
    """Only what a replica needs to load the engine (infill.args.load_engine)."""
    return argparse.Namespace(model=args.model, device=args.device, threads=args.threads, precision=args.precision,
                              cache_mode=getattr(args, "cache_mode", "exact"), lookahead=getattr(args, "lookahead", None),
                              suffix_lines=getattr(args, "suffix_lines", None),
                              context_cache=getattr(args, "context_cache", None), engine=None)


def application(model_args: argparse.Namespace, config: ServeConfig, opts: RayOptions, board: str | None):
    """The Ray Serve application: the engine replicas with the document-affinity router."""
    from ray import serve
    from ray.serve.config import RequestRouterConfig

    from infill.serve.ray_replica import EngineReplica
    from infill.serve.ray_router import ROUTER_CLASS

    options: dict = {
        "name": DEPLOYMENT_NAME,
        "max_ongoing_requests": config.max_batch,
        "ray_actor_options": {"num_cpus": opts.cpus_per_replica, "num_gpus": opts.gpus_per_replica},
        "request_router_config": RequestRouterConfig(request_router_class=ROUTER_CLASS,
                                                     request_router_kwargs={"imbalance": opts.imbalance}),
        "health_check_period_s": opts.health_check_s,
        "graceful_shutdown_timeout_s": max(5.0, config.grace_s),
        "max_constructor_retry_count": 3,  # a replica that cannot load the model fails the deployment soon
    }
    if opts.autoscale is not None:
        lo, hi = opts.autoscale
        target = opts.target_ongoing if opts.target_ongoing is not None else max(2, config.max_batch // 4)
        options["autoscaling_config"] = {"min_replicas": lo, "max_replicas": hi, "target_ongoing_requests": target,
                                         **(opts.autoscaling_overrides or {})}
    else:
        options["num_replicas"] = opts.replicas
    return serve.deployment(EngineReplica).options(**options).bind(
        model_args, config.max_batch, config.max_queue, config.grace_s, board)


def is_replica_failure(e: BaseException) -> bool:
    """The replica (its actor or node) went away under the request: worth sending it elsewhere."""
    from ray import exceptions as rx

    return isinstance(e, (rx.RayActorError, rx.ActorUnavailableError, rx.NodeDiedError, rx.ObjectLostError))


class RouterMetrics:
    """The front's own figures, plus every replica's and Ray Serve's (infill.serve.ray_metrics), as one text."""

    def __init__(self, figures=None, ray_figures=None):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = r = CollectorRegistry()
        self.in_flight = Gauge("infill_router_in_flight", "requests sent to replicas and not answered", registry=r)
        self.queued = Gauge("infill_router_queued", "requests not yet accepted by a replica", registry=r)
        self.latency = Histogram("infill_router_request_seconds", "submit -> result or error, routing included",
                                 registry=r, buckets=(.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
        self.outcomes = Counter("infill_router_requests", "answered requests by outcome", ["outcome"], registry=r)
        self.retries = Counter("infill_router_retries", "requests sent again after their replica died", registry=r)
        self.replicas = Gauge("infill_router_replicas", "replicas whose figures are current", registry=r)
        self.figures = figures
        for collector in (figures, ray_figures):
            if collector is not None:
                r.register(collector)

    def text(self) -> bytes:
        from prometheus_client import generate_latest

        if self.figures is not None:
            self.replicas.set(len(self.figures.last))
        return generate_latest(self.registry)


@dataclass(eq=False)
class Flight:
    """One request on its way through Ray Serve (the server's ticket for it)."""

    request: object
    emit: object
    priority: str
    drafts: int
    elastic: bool
    submitted: float
    task: asyncio.Task | None = None
    replica: str | None = None  # the replica running it, once accepted
    attempts: int = 0
    reason: Exception | None = None  # why it was cancelled (Cancelled or ShuttingDown)
    finished: bool = False


class RayDispatcher:
    """The Batcher's interface (submit, cancel, queued, live, drain) over a Ray Serve handle.

    ``submit`` and ``cancel`` are called on the front's event loop; ``drain`` on another thread.
    """

    def __init__(self, handle, metrics: RouterMetrics, max_queue: int, retries: int = 1):
        self.handle = handle
        self.metrics = metrics
        self.max_queue = max_queue
        self.retries = retries
        self.flights: set[Flight] = set()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.accepting = True
        self.routed: deque[tuple[str, str]] = deque(maxlen=4096)  # (document, replica) per accepted request

    @property
    def queued(self) -> int:
        return sum(1 for f in self.flights if f.replica is None)

    @property
    def live(self) -> int:
        return sum(1 for f in self.flights if f.replica is not None)

    def placements(self) -> dict[int, str | None]:
        """id(flight) -> the replica running it (tests, logs)."""
        return {id(f): f.replica for f in self.flights}

    def submit(self, request, emit, priority: str = "interactive", draft_every: int = 0, elastic: bool = False) -> Flight:
        if not self.accepting:
            raise ShuttingDown("the server is shutting down")
        if self.queued >= self.max_queue:
            raise Busy(f"the server is busy: {self.queued} requests are waiting for a replica (at most {self.max_queue}); try again")
        self.loop = asyncio.get_running_loop()
        f = Flight(request, emit, priority, max(0, draft_every), elastic, time.perf_counter())
        self.flights.add(f)
        self._gauges()
        f.task = self.loop.create_task(self._run(f))
        return f

    def cancel(self, f: Flight, reason: Exception | None = None) -> None:
        loop = self.loop
        if loop is None or f.finished:
            return
        try:
            running = asyncio.get_running_loop() is loop
        except RuntimeError:
            running = False
        if not running:
            loop.call_soon_threadsafe(self.cancel, f, reason)
            return
        if f.reason is None:
            f.reason = reason or Cancelled("fill cancelled")
        if f.task is not None:
            f.task.cancel()

    def drain(self, grace_s: float = 5.0) -> None:
        """Stop accepting; running requests get ``grace_s`` seconds, then a shutting-down error."""
        self.accepting = False
        end = time.monotonic() + grace_s
        while self.flights and time.monotonic() < end:
            time.sleep(0.01)
        for f in list(self.flights):
            self.cancel(f, ShuttingDown("the server is shutting down"))
        end = time.monotonic() + 2.0
        while self.flights and time.monotonic() < end:
            time.sleep(0.01)

    # -- one request --------------------------------------------------------------------------

    def _gauges(self) -> None:
        self.metrics.in_flight.set(len(self.flights))
        self.metrics.queued.set(self.queued)

    def _finish(self, f: Flight, kind: str, payload) -> None:
        if f.finished:
            return
        f.finished = True
        self.flights.discard(f)
        self._gauges()
        outcome = kind if kind == "result" else type(payload).__name__.lower()
        self.metrics.outcomes.labels(outcome).inc()
        self.metrics.latency.observe(time.perf_counter() - f.submitted)
        try:
            f.emit(kind, payload)
        except Exception:  # noqa: BLE001 -- a client's callback never stops the others
            log.exception("a result could not be handed over")

    async def _run(self, f: Flight) -> None:
        key = getattr(f.request, "path", None) or ""
        while True:
            f.attempts += 1
            stream = self.handle.options(stream=True, session_id=key).fill.remote(f.request, f.priority, f.drafts, f.elastic)
            try:
                async for kind, payload in stream:
                    if kind == "accepted":
                        f.replica = payload
                        self.routed.append((key, payload))
                        self._gauges()
                    elif kind == "draft":
                        f.emit(kind, payload)
                    else:
                        self._finish(f, kind, payload)
                        return
                raise ReplicaFailed("the replica ended the request without an answer")
            except asyncio.CancelledError:
                stream.cancel()  # Ray Serve cancels the call on the replica running it
                self._finish(f, "error", f.reason or Cancelled("fill cancelled"))
                return
            except Exception as e:  # noqa: BLE001
                if is_replica_failure(e) and f.attempts <= self.retries and f.reason is None:
                    log.warning("replica %s failed under a request (%s); sending it to another replica",
                                f.replica or "?", type(e).__name__)
                    self.metrics.retries.inc()
                    f.replica = None
                    self._gauges()
                    continue
                if is_replica_failure(e):
                    e = ReplicaFailed(f"the engine replica running this request failed ({type(e).__name__}) "
                                      f"after {f.attempts} attempt(s); try again")
                self._finish(f, "error", e)
                return


class RayFront:
    """The deployment, its handle, the dispatcher and the websocket front, on one event loop.

    ``run(stop, ready)`` serves until ``stop`` is set (as InfillServe.run, which it wraps, so
    infill.serve.server.ServerThread can run it on a thread)."""

    def __init__(self, model_args: argparse.Namespace, config: ServeConfig, opts: RayOptions):
        from ray import serve

        from infill.serve.ray_metrics import RayServeFigures, ReplicaFigures, start_board

        self.opts = opts
        self.board_name = f"{opts.app}-metrics"
        self.board = start_board(self.board_name)
        serve.start(proxy_location="Disabled")
        self.model_args = model_args
        self.handle = serve.run(application(model_args, config, opts, self.board_name), name=opts.app, route_prefix=None)
        info = self.handle.info.remote().result()
        self.info = info
        self.figures = ReplicaFigures(self.board)
        self.ray_figures = RayServeFigures()
        self.metrics = RouterMetrics(self.figures, self.ray_figures)
        self.dispatcher = RayDispatcher(self.handle, self.metrics, config.max_queue, opts.retries)
        model = SimpleNamespace(model_id=info["model"], model=SimpleNamespace(languages=info["languages"]))
        self.serve = InfillServe(model, config, batcher=self.dispatcher, metrics=self.metrics)

    @property
    def config(self) -> ServeConfig:
        return self.serve.config

    @property
    def port(self) -> int | None:
        return self.serve.port

    async def _poll(self, figures, every_s: float) -> None:
        while True:
            try:
                await figures.refresh()
            except Exception as e:  # noqa: BLE001 -- serve the figures we had
                log.debug("figures: %s", e)
            await asyncio.sleep(every_s)

    async def run(self, stop: asyncio.Event, ready: threading.Event | None = None) -> None:
        polls = [asyncio.ensure_future(self._poll(self.figures, 1.0)),
                 asyncio.ensure_future(self._poll(self.ray_figures, 5.0))]
        try:
            await self.serve.run(stop, ready)
        finally:
            for p in polls:
                p.cancel()

    def delete(self) -> None:
        """Remove the deployment from the cluster (the replicas stop)."""
        from ray import serve

        try:
            serve.delete(self.opts.app)
        except Exception as e:  # noqa: BLE001
            log.warning("could not delete the Ray Serve application: %s", e)


# -- the command --------------------------------------------------------------------------------


def replicas_range(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition(":")
    try:
        a, b = int(lo), int(hi)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected MIN:MAX, e.g. 1:4") from None
    if not sep or a < 0 or b < 1 or a > b:
        raise argparse.ArgumentTypeError(f"{text!r}: expected MIN:MAX with 0 <= MIN <= MAX and MAX >= 1")
    return a, b


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from infill.args import float_in, int_in

    g = parser.add_argument_group("Ray Serve (infill[ray]; docs/serve-ray.md)")
    g.add_argument("--ray", action="store_true", help="serve through engine replicas on Ray Serve")
    n = g.add_mutually_exclusive_group()
    n.add_argument("--replicas", type=int_in(1), default=None, help="replicas (default 1)")
    n.add_argument("--autoscale", metavar="MIN:MAX", type=replicas_range, default=None,
                   help="let Ray Serve scale between MIN and MAX replicas on ongoing requests")
    g.add_argument("--target-ongoing", metavar="N", type=float_in(0.0, lo_open=True), default=None,
                   help="with --autoscale: ongoing requests per replica to aim at (default max(2, max-batch/4))")
    g.add_argument("--gpus-per-replica", metavar="G", type=float_in(0.0), default=0.0, help="GPUs reserved per replica (default 0)")
    g.add_argument("--cpus-per-replica", metavar="C", type=float_in(0.0), default=1.0, help="CPUs reserved per replica (default 1)")
    g.add_argument("--address", metavar="ADDR", default=None,
                   help="a running Ray cluster (HOST:PORT of its head, or auto); default: start a local one")
    g.add_argument("--retries", type=int_in(0), default=1,
                   help="times a request whose replica died is sent to another replica (default 1)")


def check_arguments(args: argparse.Namespace) -> str | None:
    """One line if the Ray options are used wrongly."""
    if not getattr(args, "ray", False):
        used = [flag for flag, value in (("--replicas", args.replicas), ("--autoscale", args.autoscale),
                                         ("--address", args.address)) if value is not None]
        used += [flag for flag, value in (("--gpus-per-replica", args.gpus_per_replica),
                                          ("--target-ongoing", args.target_ongoing)) if value]
        return f"{', '.join(used)} need(s) --ray" if used else None
    if not ray_available():
        return INSTALL_HINT
    return None


def start_ray(address: str | None) -> bool:
    """Connect to ``address`` or start a local cluster; True if this process started it."""
    import ray

    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        return False
    ray.init(include_dashboard=False, object_store_memory=LOCAL_OBJECT_STORE_BYTES, logging_level=logging.WARNING,
             log_to_driver=False)
    return True


def main(args: argparse.Namespace) -> int:
    """``infill serve --ray`` (its options were checked by infill.serve.command)."""
    import ray

    opts = RayOptions(replicas=args.replicas or 1, autoscale=args.autoscale, gpus_per_replica=args.gpus_per_replica,
                      cpus_per_replica=args.cpus_per_replica, address=args.address, retries=args.retries,
                      target_ongoing=args.target_ongoing)
    config = config_from_args(args)
    if args.model is not None and not Path(args.model).is_dir():
        print(f"infill serve: error: --model {args.model}: no such directory", file=sys.stderr)
        return 2
    started = start_ray(opts.address)
    try:
        front = RayFront(model_arguments(args), config, opts)
    except Exception as e:  # noqa: BLE001 -- e.g. a replica could not load the model, no GPU to place it
        print(f"infill serve: error: the Ray Serve deployment failed: {e}", file=sys.stderr)
        if started:
            ray.shutdown()
        return 1

    def banner() -> str:
        count = f"{opts.autoscale[0]}..{opts.autoscale[1]}" if opts.autoscale else str(opts.replicas)
        return f"infill serve: {front.info['model']} on ws://{config.host}:{front.port} ({count} Ray Serve replicas)"

    try:
        run_until_signalled(front, banner)
    finally:
        front.delete()
        if started:
            ray.shutdown()
    return 0
