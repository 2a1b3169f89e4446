"""Exact and near-duplicate removal across the whole registry corpus; the first copy wins.

Exact: ``corpus.content_key`` (a hash of the text with trailing whitespace removed).
Near: MinHash signatures (``datasketch``) of the set of 5-token shingles of each file,
indexed with LSH; a file whose estimated Jaccard similarity to an earlier kept file reaches the
threshold (0.85 by default) is a near duplicate. Candidates from LSH are checked against the
stored signature, so the threshold is what decides.

Callers feed files in a fixed order; the result depends on that order and nothing else. It
keeps every kept file's signature in memory (``num_perm`` 8-byte values each).
"""

from __future__ import annotations

import re

from infill.errors import InputError
from infill.train.corpus import content_key

_TOKEN = re.compile(r"\w+|[^\w\s]")


def _datasketch():
    try:
        import datasketch
    except ModuleNotFoundError as e:  # pragma: no cover - depends on the installation
        raise InputError("near-duplicate detection needs datasketch: pip install 'infill[corpus]'") from e
    return datasketch


def shingles(text: str, width: int = 5) -> set[bytes]:
    """The set of ``width``-token windows of ``text`` (the whole token list when shorter)."""
    tokens = _TOKEN.findall(text)
    if len(tokens) <= width:
        return {" ".join(tokens).encode()}
    return {" ".join(tokens[i:i + width]).encode() for i in range(len(tokens) - width + 1)}


class Deduplicator:
    """``check(key, text)``: "duplicate", "near-duplicate", or None (then the file is kept and
    remembered)."""

    def __init__(self, threshold: float = 0.85, num_perm: int = 128, width: int = 5) -> None:
        ds = _datasketch()
        self._minhash = ds.MinHash
        self.threshold, self.num_perm, self.width = threshold, num_perm, width
        self.lsh = ds.MinHashLSH(threshold=threshold, num_perm=num_perm)
        self.exact: set[str] = set()
        self.signatures: dict[str, object] = {}  # key -> hash values (numpy array)
        self._permutations = ds.MinHash(num_perm=num_perm, seed=1, scheme="affine32").permutations

    def signature(self, text: str):
        m = self._minhash(num_perm=self.num_perm, seed=1, permutations=self._permutations, scheme="affine32")
        m.update_batch(list(shingles(text, self.width)))
        return m

    def check(self, key: str, text: str) -> str | None:
        exact = content_key(text)
        if exact in self.exact:
            return "duplicate"
        m = self.signature(text)
        for other in self.lsh.query(m):
            if (m.hashvalues == self.signatures[other]).mean() >= self.threshold:
                return "near-duplicate"
        self.exact.add(exact)
        self.lsh.insert(key, m)
        self.signatures[key] = m.hashvalues
        return None
