"""The worker: one thread owns the engine; the event loop never runs the model.

Every fill is keyed (per document, per kind of request). A newer fill with the same key sets the
previous one's cancel flag, so its denoising stops between steps, or it never starts if it is
still waiting for the worker or its debounce. Finished fills go into a small LRU cache keyed on
the text around the cursor. The model is loaded lazily, in the worker, when the server is
initialized (and again when the model options change).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Hashable

from infill.errors import Cancelled, ModelLoadError
from infill.protocol import FillRequest, FillResult

log = logging.getLogger(__name__)

CACHE_SIZE = 64


class LRU:
    """A tiny least-recently-used map."""

    def __init__(self, size: int = CACHE_SIZE):
        self.size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable) -> Any | None:
        if key not in self._items:
            return None
        self._items.move_to_end(key)
        return self._items[key]

    def put(self, key: Hashable, value: Any) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()


class Scheduler:
    """Runs engine loads and fills on a single worker thread."""

    def __init__(self, loader: Callable[[Any], Any]):
        self._loader = loader  # model key -> Engine (runs in the worker; imports torch)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="infill-engine")
        self._engine: Any = None
        self._engine_key: Any = None
        self._load_error: Exception | None = None
        self._loading: Future | None = None
        self._flags: dict[Hashable, threading.Event] = {}
        self.cache = LRU()

    # -- the model ------------------------------------------------------------------------

    def load(self, key: Any) -> Future:
        """Load the engine for ``key`` in the worker (a no-op if it is already loaded)."""
        self._loading = self._executor.submit(self._load, key)
        return self._loading

    def _load(self, key: Any) -> Any:
        if self._engine is not None and self._engine_key == key:
            return self._engine
        self._engine, self._engine_key, self._load_error = None, key, None
        self.cache.clear()
        try:
            self._engine = self._loader(key)
        except Exception as e:  # noqa: BLE001 - reported on every fill until the options change
            self._load_error = e
            raise
        return self._engine

    @property
    def engine(self) -> Any:
        return self._engine

    # -- fills ------------------------------------------------------------------------------

    def cancel(self, key: Hashable) -> None:
        """Cancel the fill running or waiting under ``key``, if any."""
        flag = self._flags.pop(key, None)
        if flag is not None:
            flag.set()

    def cancel_all(self) -> None:
        for key in list(self._flags):
            self.cancel(key)

    async def fill(
        self, key: Hashable, request: FillRequest, *, debounce_s: float = 0.0, cache_key: Hashable | None = None
    ) -> FillResult:
        """The engine's result for ``request``; raises Cancelled if a newer fill took ``key``.

        Awaiting this in a task that gets cancelled (``$/cancelRequest``) sets the cancel flag too.
        """
        self.cancel(key)
        flag = threading.Event()
        self._flags[key] = flag
        try:
            if debounce_s > 0:
                await asyncio.sleep(debounce_s)
            if flag.is_set():
                raise Cancelled("superseded by a newer request")
            full_key = None if cache_key is None else (self._engine_key, request.options, cache_key)
            if full_key is not None and (hit := self.cache.get(full_key)) is not None:
                return hit
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(self._executor, self._run, request, flag)
            if full_key is not None:
                self.cache.put(full_key, result)
            return result
        except asyncio.CancelledError:
            flag.set()
            raise
        finally:
            if self._flags.get(key) is flag:
                del self._flags[key]

    def _run(self, request: FillRequest, flag: threading.Event) -> FillResult:
        if flag.is_set():
            raise Cancelled("cancelled before it started")
        if self._engine is None:
            if self._load_error is not None:
                raise ModelLoadError(f"the model could not be loaded: {self._load_error}")
            self._load(self._engine_key)
        return self._engine.fill(request, cancel=flag)

    def shutdown(self) -> None:
        self.cancel_all()
        self._executor.shutdown(wait=False, cancel_futures=True)
