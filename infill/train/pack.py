"""`infill corpus pack`: a corpus directory made to fit a size limit, for a machine it must travel
to (the GPU recipes read a corpus of at most 48 MiB: README.md, training).

The packed directory holds the same splits as xz-compressed JSONL (``train.jsonl.xz``,
``valid.jsonl.xz``; one document a line, as the source has them) and the source's manifest with
what was kept. The validation split is kept whole; the training split's documents follow in an
order drawn from the seed, in xz streams of about CHUNK_BYTES of text each, for as long as the
next stream still fits the limit. Every file together stays within the limit. Reading either form
is ``corpus.split_file`` / ``corpus.iter_documents``'s business; nothing here tokenizes, filters
or deduplicates (the corpus was built so).
"""

from __future__ import annotations

import argparse
import json
import lzma
import random
from pathlib import Path

from infill.errors import InputError
from infill.train.corpus import open_split, split_file

CHUNK_BYTES = 4 << 20  # text per xz stream: the packed size is checked stream by stream
FACTS_RESERVE = 2048  # bytes kept back for what the manifest says of the packing


def _lines(path: Path) -> list[bytes]:
    with open_split(path) as fh:
        return [line if line.endswith(b"\n") else line + b"\n" for line in fh if line.strip()]


def _stream(lines: list[bytes]) -> bytes:
    return lzma.compress(b"".join(lines), preset=9)


def pack(src: Path, out: Path, max_bytes: int, seed: int = 0, chunk_bytes: int = CHUNK_BYTES) -> dict:
    """Write the packed corpus of ``src`` into ``out`` within ``max_bytes`` (xz streams of about
    ``chunk_bytes`` of text); returns what it kept."""
    valid_lines = _lines(split_file(src, "valid"))
    train_lines = _lines(split_file(src, "train"))
    if not train_lines:
        raise InputError(f"{src}: the training split is empty")
    valid = _stream(valid_lines)
    manifest_path = src / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    if len(json.dumps(manifest, indent=1)) > max_bytes // 16:  # a many-package manifest: its summary travels
        manifest = {k: manifest[k] for k in ("totals",) if k in manifest}
    budget = max_bytes - len(json.dumps(manifest, indent=1)) - FACTS_RESERVE - len(valid)
    if budget <= 0:
        raise InputError(f"{src}: the validation split alone packs to {len(valid)} bytes, over the {max_bytes}-byte limit")
    random.Random(seed).shuffle(train_lines)
    out.mkdir(parents=True, exist_ok=True)
    kept, text_bytes, used = 0, 0, 0
    with open(out / "train.jsonl.xz.tmp", "wb") as fh:
        at = 0
        while at < len(train_lines):
            size, end = 0, at
            while end < len(train_lines) and (size < chunk_bytes or end == at):
                size += len(train_lines[end])
                end += 1
            stream = _stream(train_lines[at:end])
            if used + len(stream) > budget:
                break
            fh.write(stream)
            used += len(stream)
            kept, text_bytes, at = kept + end - at, text_bytes + size, end
    if not kept:
        (out / "train.jsonl.xz.tmp").unlink()
        raise InputError(f"no training documents fit {max_bytes} bytes beside the validation split")
    (out / "train.jsonl.xz.tmp").replace(out / "train.jsonl.xz")
    (out / "valid.jsonl.xz").write_bytes(valid)
    facts = {"limit_bytes": max_bytes, "seed": seed, "train_documents": kept, "train_documents_in_source": len(train_lines),
             "train_text_bytes": text_bytes, "train_xz_bytes": used, "valid_documents": len(valid_lines), "valid_xz_bytes": len(valid)}
    manifest["packed"] = facts
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return facts


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", type=Path, required=True, help="the corpus directory (train.jsonl, valid.jsonl, manifest.json)")
    p.add_argument("--out", type=Path, required=True, help="the packed corpus directory")
    p.add_argument("--max-mib", type=float, default=48.0, help="every packed file together at most this many MiB (default 48)")
    p.add_argument("--seed", type=int, default=0, help="the order in which training documents are kept")


def main(a: argparse.Namespace) -> int:
    facts = pack(a.corpus, a.out, int(a.max_mib * (1 << 20)), a.seed)
    print(json.dumps(facts, indent=1))
    return 0
