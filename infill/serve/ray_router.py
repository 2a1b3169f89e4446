"""Document affinity for ``infill serve --ray``: a Ray Serve request router.

A replica that has filled a document holds its encoded context (the engine's segment cache,
infill/model/context_cache.py), so the next keystroke in that document is cheapest there. The
front (infill/serve/ray_front.py) sends each request with ``session_id`` = its document (the
request's ``path``, the language server's URI). :class:`AffinityRouter`:

- remembers, per document, the replica its last request was routed to (a bounded LRU map);
- routes a document's request to that replica first, unless its queue is longer than the least
  loaded candidate's by more than ``imbalance`` requests, or it is full or gone;
- otherwise (a new document, no document, the holder overloaded or dead) to the least loaded
  replica: Ray Serve's own selection among a rank takes the one with the shortest queue (cached
  queue lengths, probing the others).

It does not place replicas, retry failed requests (the front does), or look inside requests: the
document key is all it reads. It runs inside the front's process (handle-side routing); Ray Serve
imports it by name, so every node needs infill installed (docs/serve-ray.md).
"""

from __future__ import annotations

import hashlib
import random
from collections import OrderedDict
from typing import List, Optional

from ray.serve.request_router import PendingRequest, ReplicaID, RequestRouter, RunningReplica

ROUTER_CLASS = f"{__name__}.AffinityRouter"


class AffinityRouter(RequestRouter):
    """Prefer the replica that served the document last; else the least loaded one."""

    def initialize_state(self, imbalance: int = 8, remember: int = 8192, **kwargs) -> None:
        self._imbalance = int(imbalance)
        self._remember = int(remember)
        self._holders: OrderedDict[str, ReplicaID] = OrderedDict()
        self.affine = 0  # requests routed to their document's replica (for tests and logs)
        self.spread = 0  # requests routed by load

    def _holders_map(self) -> OrderedDict:
        if not hasattr(self, "_holders"):  # initialize_state is called with the configured kwargs only
            self.initialize_state()
        return self._holders

    @staticmethod
    def _key(pending_request: Optional[PendingRequest]) -> str:
        return pending_request.metadata.session_id if pending_request is not None else ""

    def holder(self, key: str) -> Optional[ReplicaID]:
        return self._holders_map().get(key)

    def _queue_len(self, replica: RunningReplica) -> Optional[int]:
        return self._replica_queue_len_cache.get(replica.replica_id)

    def _overloaded(self, holder: RunningReplica, others: List[RunningReplica]) -> bool:
        mine = self._queue_len(holder)
        if mine is None or not others:
            return False
        theirs = [q for q in (self._queue_len(r) for r in others) if q is not None]
        return bool(theirs) and mine - min(theirs) > self._imbalance

    @staticmethod
    def _spread(key: str, replicas: List[RunningReplica]) -> List[RunningReplica]:
        """The replicas in an order of the document's own (rendezvous hashing): among replicas
        with equally short queues the first is taken, so new documents spread over idle replicas."""
        if not key:
            return random.sample(replicas, len(replicas))
        return sorted(replicas, key=lambda r: hashlib.blake2b(f"{key}|{r.replica_id.unique_id}".encode(), digest_size=8).digest())

    async def choose_replicas(self, candidate_replicas: List[RunningReplica],
                              pending_request: Optional[PendingRequest] = None) -> List[List[RunningReplica]]:
        if not candidate_replicas:
            return []
        if pending_request is not None:
            pending_request.routing_context.should_backoff = True  # every rank tried: back off, then again
        key = self._key(pending_request)
        holder_id = self._holders_map().get(key) if key else None
        holder = next((r for r in candidate_replicas if r.replica_id == holder_id), None)
        if holder is None:
            return [self._spread(key, candidate_replicas)]
        others = [r for r in candidate_replicas if r is not holder]
        if self._overloaded(holder, others):
            return [self._spread(key, candidate_replicas)]
        return [[holder], others] if others else [[holder]]

    def on_request_routed(self, pending_request: PendingRequest, replica_id: ReplicaID, result) -> None:
        key = self._key(pending_request)
        if not key:
            return
        holders = self._holders_map()
        if holders.get(key) == replica_id:
            self.affine += 1
        else:
            self.spread += 1
        holders[key] = replica_id
        holders.move_to_end(key)
        while len(holders) > self._remember:
            holders.popitem(last=False)

    def on_replica_actor_died(self, replica_id: ReplicaID) -> None:
        super().on_replica_actor_died(replica_id)
        holders = self._holders_map()
        for key in [k for k, v in holders.items() if v == replica_id]:
            del holders[key]
