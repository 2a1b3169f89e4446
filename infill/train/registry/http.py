"""The network client of the registry corpus: ``get(url) -> bytes``, and nothing else.

``HttpFetcher`` speaks HTTPS with a timeout, a size limit and a few retries on transient
failures. A missing resource (HTTP 404/410) raises ``NotFound``, a download over the size limit
``TooLarge``: both are final answers a caller records. Anything else that goes wrong raises
``FetchError`` after the retries: a caller does not record it, so a rerun tries again.

It does not cache, parse or decide anything; tests pass any object with the same ``get``.
"""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.request
from typing import Protocol

log = logging.getLogger(__name__)

USER_AGENT = "infill-corpus/0.1 (+https://pypi.org/project/infill/)"


class FetchError(Exception):
    """A transient failure (network, server error): not recorded, retried on the next run."""


class NotFound(Exception):
    """The registry has no such resource (a final answer)."""


class TooLarge(Exception):
    """The resource is larger than the configured limit (a final answer)."""


class Fetcher(Protocol):
    def get(self, url: str, max_bytes: int | None = None) -> bytes: ...


class HttpFetcher:
    """GET over HTTPS: ``timeout`` seconds per attempt, ``retries`` retries with backoff."""

    def __init__(self, timeout: float = 60.0, retries: int = 3, backoff: float = 2.0) -> None:
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff

    def get(self, url: str, max_bytes: int | None = None) -> bytes:
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * attempt)
            try:
                return self._get_once(url, max_bytes)
            except urllib.error.HTTPError as e:
                if e.code in (404, 410):
                    raise NotFound(f"{url}: HTTP {e.code}") from None
                if e.code < 500 and e.code != 429:
                    raise FetchError(f"{url}: HTTP {e.code}") from None
                last = e
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as e:
                last = e
            log.debug("retrying %s after %s", url, last)
        raise FetchError(f"{url}: {last}")

    def _get_once(self, url: str, max_bytes: int | None) -> bytes:
        req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            length = resp.headers.get("Content-Length")
            if max_bytes is not None and length and int(length) > max_bytes:
                raise TooLarge(f"{url}: {int(length)} bytes > {max_bytes}")
            data = resp.read(max_bytes + 1 if max_bytes is not None else -1)
            if max_bytes is not None and len(data) > max_bytes:
                raise TooLarge(f"{url}: more than {max_bytes} bytes")
            return data
