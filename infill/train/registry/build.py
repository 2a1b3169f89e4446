"""``infill corpus fetch``: build the many-language corpus from package registries, resumably.

Stages, each safe to interrupt:

1. Listing: each source names its packages (``--packages-per-source`` of them); the lists are
   saved once in ``STATE/listing.json`` and reused by every rerun, so a rerun works on the same
   packages even if a registry changed meanwhile.
2. Fetching: packages are taken round-robin across the sources (so every language advances
   together), ``--jobs`` at a time. Each finished package -- its kept files, or the reason it
   was skipped -- is written atomically to ``STATE/records/<source>/<name>.json.gz``; a rerun
   skips packages that have a record (``--retry-skipped``: except those recorded as skipped,
   after a rule change). A network failure writes no record (the next run retries it). New packages stop being started once the kept bytes reach ``--max-bytes``.
3. Assembly: the records, in the listing's round-robin order, are deduplicated exactly and
   near-exactly (``dedup``), split into train and validation by package
   (``corpus.choose_valid``) and written as ``train.jsonl`` / ``valid.jsonl`` (one row per file:
   package, source, path, language, text; what ``corpus.iter_documents`` reads) and
   ``manifest.json`` (every package with its version, licence and where it was read, files and
   bytes; the excluded ones with their reasons; totals per language, source and split; the
   lists used). Assembly always starts from the records, so it is repeatable.

It does not tokenize or train, and it downloads nothing but what the sources ask for.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as _dt
import json
import logging
import lzma
import os
import sys
import tarfile
import time
import zipfile
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path

from infill.errors import InputError
from infill.train.corpus import CorpusConfig, choose_valid
from infill.train.registry import debian, npm, pypi
from infill.train.registry.dedup import Deduplicator
from infill.train.registry.files import BenchmarkGuard, known_languages
from infill.train.registry.http import Fetcher, FetchError, HttpFetcher, NotFound, TooLarge
from infill.train.registry.package import PackageRef, Record, Skip, load_record, record_path, save_record
from infill.train.registry.source import FetchContext, Source

log = logging.getLogger(__name__)


@dataclass
class FetchConfig:
    out: Path
    state_dir: Path | None = None  # None: OUT/state
    languages: tuple[str, ...] = ()  # () : every language of grammars/languages.toml
    packages_per_source: int = 50
    source_packages: dict[str, int] = field(default_factory=dict)  # per-source overrides of packages_per_source
    max_bytes: int | None = None  # stop starting new packages once this many source bytes are kept
    jobs: int = 4
    retry_skipped: bool = False  # fetch again the packages recorded as skipped (after a rule change)
    max_archive_bytes: int = 40_000_000
    near_threshold: float = 0.85
    num_perm: int = 128
    valid_fraction: float = 0.03
    seed: int = 0
    debian_mirror: str = debian.MIRROR
    debian_suite: str = debian.SUITE
    corpus: CorpusConfig = field(default_factory=lambda: CorpusConfig(include_stdlib=False, include_site_packages=False))

    def count(self, source: str) -> int:
        """How many packages ``source`` lists."""
        return self.source_packages.get(source, self.packages_per_source)

    @property
    def state(self) -> Path:
        return Path(self.state_dir) if self.state_dir else Path(self.out) / "state"


def make_sources(cfg: FetchConfig, ctx: FetchContext) -> list[Source]:
    """The sources serving at least one of the wanted languages, in a fixed order."""
    index = debian.SourcesIndex(cfg.state, cfg.debian_mirror, cfg.debian_suite)
    every: list[Source] = [pypi.PyPI(), npm.Npm(), *(debian.Debian(lang, index) for lang in debian.LANGUAGES)]
    return [s for s in every if s.languages & ctx.languages]


def _write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def listing(cfg: FetchConfig, sources: list[Source], ctx: FetchContext) -> dict[str, dict]:
    """``{source: {"origin", "names"}}``: saved on the first run, read back on later ones."""
    path = cfg.state / "listing.json"
    saved = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    changed = False
    for s in sources:
        if s.name in saved and len(saved[s.name]["names"]) >= cfg.count(s.name):
            continue
        refs = s.listing(ctx, cfg.count(s.name))
        saved[s.name] = {"origin": s.origin, "names": [r.name for r in refs]}
        changed = True
    if changed:
        _write_json(path, saved)
    return {s.name: {**saved[s.name], "names": saved[s.name]["names"][: cfg.count(s.name)]} for s in sources}


def round_robin(lists: dict[str, dict]) -> list[PackageRef]:
    """One package of each source in turn: the fetch order and the dedup order."""
    queues = [[PackageRef(src, n) for n in v["names"]] for src, v in lists.items()]
    out = []
    for i in range(max((len(q) for q in queues), default=0)):
        out.extend(q[i] for q in queues if i < len(q))
    return out


def fetch_one(source: Source, ref: PackageRef, ctx: FetchContext) -> Record:
    """The package's record; a final refusal becomes a record with its reason. Transient
    failures (``FetchError``) propagate."""
    try:
        rec = source.fetch(ref, ctx)
        if not rec.files:
            rec.reason = "no usable source file"
        return rec
    except (Skip, NotFound, TooLarge) as e:
        return Record(ref.source, ref.name, reason=str(e) or type(e).__name__)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, lzma.LZMAError, zlib.error) as e:
        return Record(ref.source, ref.name, reason=f"unreadable archive: {e}")


def fetch_all(cfg: FetchConfig, sources: list[Source], refs: list[PackageRef], ctx: FetchContext) -> dict[str, int]:
    """Fetch every package without a record, ``cfg.jobs`` at a time; counts of what happened."""
    by_name = {s.name: s for s in sources}
    contexts = {s.name: replace(ctx, languages=ctx.languages & s.languages) for s in sources}
    kept_bytes = 0
    todo = []
    counts = {"done before": 0, "fetched": 0, "failed (retry later)": 0, "not started (byte budget)": 0}
    for ref in refs:
        rec = load_record(record_path(cfg.state, ref))
        if rec is None or (cfg.retry_skipped and rec.reason):
            todo.append(ref)
        else:
            counts["done before"] += 1
            kept_bytes += sum(len(f["text"].encode()) for f in rec.files)
    started = time.monotonic()
    with cf.ThreadPoolExecutor(max_workers=max(1, cfg.jobs)) as pool:
        pending: dict[cf.Future, PackageRef] = {}
        queue = list(reversed(todo))
        while queue or pending:
            while queue and len(pending) < max(1, cfg.jobs):
                if cfg.max_bytes is not None and kept_bytes >= cfg.max_bytes:
                    counts["not started (byte budget)"] += len(queue)
                    queue.clear()
                    break
                ref = queue.pop()
                pending[pool.submit(fetch_one, by_name[ref.source], ref, contexts[ref.source])] = ref
            if not pending:
                break
            done, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for fut in done:
                ref = pending.pop(fut)
                try:
                    rec = fut.result()
                except FetchError as e:
                    counts["failed (retry later)"] += 1
                    log.warning("%s: %s (not recorded; a rerun retries it)", ref.key, e)
                    continue
                except Exception:  # a package this code cannot handle must not end a long run
                    counts["failed (retry later)"] += 1
                    log.exception("%s: failed (not recorded; a rerun retries it)", ref.key)
                    continue
                save_record(record_path(cfg.state, ref), rec)
                counts["fetched"] += 1
                size = sum(len(f["text"].encode()) for f in rec.files)
                kept_bytes += size
                log.info("%s %s: %s [%.1f MB kept, %.0f s]", ref.key, rec.version,
                         rec.reason or f"{len(rec.files)} files, {size / 1e3:.0f} kB, {rec.license}",
                         kept_bytes / 1e6, time.monotonic() - started)
    return counts


def assemble(cfg: FetchConfig, lists: dict[str, dict], refs: list[PackageRef], counts: dict[str, int]) -> dict:
    """Dedup, split and write the corpus from the records; the manifest."""
    dedup = Deduplicator(threshold=cfg.near_threshold, num_perm=cfg.num_perm)
    skipped: dict[str, int] = {}
    kept: list[tuple[Record, list[dict]]] = []
    excluded = []
    missing = 0
    for ref in refs:
        rec = load_record(record_path(cfg.state, ref))
        if rec is None:
            missing += 1
            continue
        for reason, n in rec.skipped_files.items():
            skipped[reason] = skipped.get(reason, 0) + n
        if rec.reason:
            excluded.append({"source": rec.source, "name": rec.name, "version": rec.version, "reason": rec.reason})
            continue
        rows = []
        for f in rec.files:
            verdict = dedup.check(f"{rec.key}/{f['path']}", f["text"])
            if verdict:
                skipped[verdict] = skipped.get(verdict, 0) + 1
            else:
                rows.append(f)
        if rows:
            kept.append((rec, rows))
        else:
            excluded.append({"source": rec.source, "name": rec.name, "version": rec.version,
                             "reason": "every source file duplicates an earlier package's"})
    if not kept:
        raise InputError(f"empty corpus: no package of {len(refs)} listed gave a usable, permissively licensed file")
    sizes = {rec.key: sum(len(f["text"].encode()) for f in rows) for rec, rows in kept}
    valid = choose_valid(sizes, cfg.valid_fraction, cfg.seed)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    totals = {s: {"packages": 0, "files": 0, "bytes": 0} for s in ("train", "valid")}
    languages: dict[str, dict[str, int]] = {}
    per_source: dict[str, dict[str, int]] = {}
    packages = []
    handles = {s: open(out / f"{s}.jsonl.tmp", "w", encoding="utf-8") for s in ("train", "valid")}
    try:
        for rec, rows in kept:
            split = "valid" if rec.key in valid else "train"
            langs: dict[str, dict[str, int]] = {}
            for f in rows:
                handles[split].write(json.dumps({"package": rec.name, "source": rec.source, "path": f["path"],
                                                 "language": f["language"], "text": f["text"]}, ensure_ascii=False))
                handles[split].write("\n")
                n = len(f["text"].encode())
                for table in (langs, languages):
                    t = table.setdefault(f["language"], {"files": 0, "bytes": 0})
                    t["files"] += 1
                    t["bytes"] += n
            packages.append({"source": rec.source, "name": rec.name, "version": rec.version, "license": rec.license,
                             "license_source": rec.license_source, "url": rec.url, "files": len(rows),
                             "bytes": sizes[rec.key], "languages": dict(sorted(langs.items())), "split": split})
            for t in (totals[split], per_source.setdefault(rec.source, {"packages": 0, "files": 0, "bytes": 0})):
                t["packages"] += 1
                t["files"] += len(rows)
                t["bytes"] += sizes[rec.key]
    finally:
        for fh in handles.values():
            fh.close()
    for s in ("train", "valid"):
        os.replace(out / f"{s}.jsonl.tmp", out / f"{s}.jsonl")
    for e in excluded:
        per_source.setdefault(e["source"], {"packages": 0, "files": 0, "bytes": 0})
        per_source[e["source"]]["excluded"] = per_source[e["source"]].get("excluded", 0) + 1
    manifest = {
        "kind": "registries",
        "python": sys.version.split()[0],
        "date": _dt.date.today().isoformat(),
        "config": {
            "languages": sorted(cfg.languages or known_languages()), "packages_per_source": cfg.packages_per_source,
            "source_packages": cfg.source_packages,
            "max_bytes": cfg.max_bytes, "max_archive_bytes": cfg.max_archive_bytes,
            "max_file_bytes": cfg.corpus.max_file_bytes, "max_line_chars": cfg.corpus.max_line_chars,
            "near_threshold": cfg.near_threshold, "num_perm": cfg.num_perm, "valid_fraction": cfg.valid_fraction,
            "seed": cfg.seed, "debian": f"{cfg.debian_mirror} {cfg.debian_suite} main",
        },
        "lists": lists,
        "packages": packages,
        "excluded": excluded,
        "skipped_files": dict(sorted(skipped.items())),
        "fetch": {**counts, "listed without a record": missing},
        "totals": {
            **totals,
            "packages": len(packages), "excluded_packages": len(excluded),
            "files": sum(t["files"] for t in totals.values()), "bytes": sum(t["bytes"] for t in totals.values()),
            "languages": dict(sorted(languages.items())), "sources": per_source,
        },
    }
    _write_json(out / "manifest.json", manifest)
    return manifest


def run(cfg: FetchConfig, fetcher: Fetcher | None = None, guard: BenchmarkGuard | None = None,
        sources: list[Source] | None = None) -> dict:
    """List, fetch (resuming) and assemble; the manifest. Defaults: HTTPS, the benchmark files
    next to this checkout, and every source serving a wanted language (``make_sources``)."""
    wanted = frozenset(cfg.languages or known_languages())
    unknown = wanted - set(known_languages())
    if unknown:
        raise InputError(f"unknown languages {sorted(unknown)}; known: {known_languages()}")
    ctx = FetchContext(fetcher=fetcher or HttpFetcher(), languages=wanted, corpus=cfg.corpus,
                       guard=guard if guard is not None else BenchmarkGuard.default(),
                       max_archive_bytes=cfg.max_archive_bytes)
    if sources is None:
        sources = make_sources(cfg, ctx)
    sources = [s for s in sources if s.languages & wanted]
    lists = listing(cfg, sources, ctx)
    refs = round_robin(lists)
    log.info("%d packages listed from %s", len(refs), ", ".join(lists))
    counts = fetch_all(cfg, sources, refs, ctx)
    manifest = assemble(cfg, lists, refs, counts)
    t = manifest["totals"]
    log.info("corpus: %d packages (%d excluded), %d files, %.1f MB: %s", t["packages"], t["excluded_packages"],
             t["files"], t["bytes"] / 1e6, ", ".join(f"{k} {v['bytes'] / 1e6:.1f} MB" for k, v in t["languages"].items()))
    return manifest


# ---------------------------------------------------------------------------- command line


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True, help="the corpus directory (train.jsonl, valid.jsonl, manifest.json)")
    p.add_argument("--state", type=Path, help="where finished packages are recorded (default: OUT/state); rerun to resume")
    p.add_argument("--languages", nargs="+", default=[], metavar="LANG",
                   help=f"languages to keep (default: all of {', '.join(known_languages())})")
    p.add_argument("--packages-per-source", type=int, default=50, metavar="N",
                   help="packages listed per source (pypi, npm, and each debian-<language>); default 50")
    p.add_argument("--source-packages", nargs="+", default=[], metavar="SOURCE=N",
                   help="a different count for some sources, e.g. npm=400 debian-rust=300")
    p.add_argument("--max-bytes", type=float, metavar="N", help="start no new package once N bytes of source are kept (e.g. 1.2e9)")
    p.add_argument("--retry-skipped", action="store_true",
                   help="fetch again the packages recorded as skipped (after the licence or filter rules changed)")
    p.add_argument("--jobs", type=int, default=4, help="packages fetched at once (default 4)")
    p.add_argument("--max-archive-mb", type=float, default=40, help="skip packages whose archives are larger (default 40 MB)")
    p.add_argument("--near-threshold", type=float, default=0.85, help="Jaccard similarity of a near duplicate (default 0.85)")
    p.add_argument("--valid-fraction", type=float, default=0.03)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--debian-suite", default=debian.SUITE)
    p.add_argument("--debian-mirror", default=debian.MIRROR)


def _source_counts(pairs: list[str]) -> dict[str, int]:
    out = {}
    for pair in pairs:
        name, sep, n = pair.partition("=")
        if not sep or not n.isdigit():
            raise InputError(f"--source-packages wants SOURCE=N, got {pair!r}")
        out[name] = int(n)
    return out


def main(a: argparse.Namespace) -> int:
    cfg = FetchConfig(
        source_packages=_source_counts(a.source_packages),
        out=a.out, state_dir=a.state, languages=tuple(a.languages), packages_per_source=a.packages_per_source,
        max_bytes=int(a.max_bytes) if a.max_bytes else None, jobs=a.jobs, retry_skipped=a.retry_skipped, max_archive_bytes=int(a.max_archive_mb * 1e6),
        near_threshold=a.near_threshold, valid_fraction=a.valid_fraction, seed=a.seed,
        debian_mirror=a.debian_mirror, debian_suite=a.debian_suite,
    )
    manifest = run(cfg)
    print(json.dumps({k: manifest["totals"][k] for k in ("packages", "excluded_packages", "files", "bytes", "languages")}, indent=1))
    return 0
