"""Which files of a downloaded package go into the corpus, and as which language.

- ``language_of_path`` maps a file extension to a language through ``grammars/languages.toml``
  (the one list of languages infill knows; read here as data, without ``infill.syntax``).
- ``read_archive`` reads the regular files of a tar (any compression tarfile knows) or zip
  archive from memory, with the archive's single top-level directory stripped; it never
  extracts to disk, and members larger than a limit are only counted.
- ``select_sources`` keeps the files of the wanted languages that pass ``corpus.check_text``
  (size, UTF-8, long lines, generated, mostly data), outside vendored and fixture directories,
  minified bundles and anything that looks like benchmark data (a path naming HumanEval, or
  several lines of the benchmark's own text, see ``BenchmarkGuard``).

It does not read licences (``licences``), fetch (``http``) or deduplicate (``dedup``).
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import re
import tarfile
import tomllib
import zipfile
from collections.abc import Callable, Iterable
from importlib import resources
from pathlib import Path

from infill.train.corpus import _BENCHMARK_RE, CorpusConfig, check_text

# Directories whose files are someone else's code (vendored), build output of dependencies,
# or test inputs rather than code written to be read.
SKIP_DIRS = frozenset({
    "node_modules", "bower_components", "vendor", "vendored", "_vendor", "third_party", "thirdparty",
    "3rdparty", "third-party", "external", "extern", "site-packages", "dist-packages", "__pycache__",
    ".git", ".hg", ".svn", "testdata", "fixtures", "__fixtures__", "__snapshots__", ".pc",
})
_MINIFIED_NAME = re.compile(r"[.-]min\.(?:js|mjs|cjs)$|\.bundle\.js$", re.IGNORECASE)
# Distinctive benchmark lines: at least this long after stripping.
_BENCH_LINE_CHARS = 30
_BENCH_HITS = 3
_REPO = Path(__file__).resolve().parents[3]


@functools.cache
def extension_languages() -> dict[str, str]:
    """File extension (lower-case, no dot) -> language name, from grammars/languages.toml."""
    table = tomllib.loads(resources.files("infill.grammars").joinpath("languages.toml").read_text(encoding="utf-8"))
    out: dict[str, str] = {}
    for name, t in table.items():
        for ext in t.get("extensions", []):
            out.setdefault(ext.lower(), name)
    return out


def known_languages() -> list[str]:
    return sorted(set(extension_languages().values()))


def language_of_path(path: str) -> str | None:
    name = path.rsplit("/", 1)[-1]
    if "." not in name:
        return None
    return extension_languages().get(name.rsplit(".", 1)[1].lower())


class BenchmarkGuard:
    """Refuses text that shares several distinctive lines with benchmark data (JSONL, gzipped or
    not, every string field of every row)."""

    def __init__(self, lines: Iterable[str] = ()) -> None:
        self.lines = frozenset(lines)

    @classmethod
    def from_files(cls, paths: Iterable[Path]) -> "BenchmarkGuard":
        lines: set[str] = set()
        for path in paths:
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt", encoding="utf-8") as fh:
                for row in fh:
                    if not row.strip():
                        continue
                    for value in json.loads(row).values():
                        if isinstance(value, str):
                            lines.update(s for s in (x.strip() for x in value.splitlines()) if len(s) >= _BENCH_LINE_CHARS)
        return cls(lines)

    @classmethod
    def default(cls) -> "BenchmarkGuard":
        """The benchmark files next to this checkout (bench/data, ../shared/data), when present."""
        roots = [_REPO / "bench" / "data", _REPO.parent / "shared" / "data"]
        files = sorted(p for r in roots if r.is_dir() for p in r.rglob("*.jsonl*") if p.suffix in (".jsonl", ".gz"))
        return cls.from_files(files)

    def matches(self, text: str) -> bool:
        if not self.lines:
            return False
        hits = 0
        for line in text.splitlines():
            if line.strip() in self.lines:
                hits += 1
                if hits >= _BENCH_HITS:
                    return True
        return False


def _parts(name: str) -> list[str] | None:
    """A member name's path components; None for one that would escape the archive."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    return None if name.startswith("/") or ".." in parts or not parts else parts


def read_archive(data: bytes, want: Callable[[str], bool], max_member_bytes: int) -> tuple[dict[str, bytes], int]:
    """``({relative path: bytes}, n_too_large)`` for the regular files ``want`` accepts.

    Paths are '/'-separated, relative to the archive's single top directory when it has one;
    members that would escape it (absolute, '..') are ignored.
    """
    if data[:4] == b"PK\x03\x04":
        zf = zipfile.ZipFile(io.BytesIO(data))
        members = [(i.filename, i.file_size, i) for i in zf.infolist() if not i.is_dir()]
        read = zf.read
    else:
        zf = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
        members = [(m.name, m.size, m) for m in zf.getmembers() if m.isfile()]

        def read(m):
            fh = zf.extractfile(m)
            return fh.read() if fh is not None else b""
    with zf:
        named = [(parts, size, m) for name, size, m in members if (parts := _parts(name))]
        tops = {parts[0] for parts, _, _ in named}
        strip = 1 if len(tops) == 1 and all(len(parts) > 1 for parts, _, _ in named) else 0
        out: dict[str, bytes] = {}
        too_large = 0
        for parts, size, m in named:
            rel = "/".join(parts[strip:])
            if not want(rel):
                continue
            if size > max_member_bytes:
                too_large += 1
                continue
            out[rel] = read(m)
    return out, too_large


def is_candidate(path: str, languages: frozenset[str]) -> bool:
    """A path whose extension is one of ``languages`` (before any content check)."""
    return language_of_path(path) in languages


def select_sources(
    files: dict[str, bytes], languages: frozenset[str], config: CorpusConfig, guard: BenchmarkGuard,
) -> tuple[list[dict], dict[str, int]]:
    """``([{"path", "language", "text"}], {skip reason: count})``, in path order.

    A ``.h`` header counts as C++ in a package with more C++ than C bytes.
    """
    kept: list[dict] = []
    skipped: dict[str, int] = {}

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    for path in sorted(files):
        language = language_of_path(path)
        if language not in languages:
            continue
        parts = path.split("/")
        if any(p in SKIP_DIRS for p in parts[:-1]):
            skip("vendored or fixture directory")
            continue
        if _MINIFIED_NAME.search(parts[-1]):
            skip("minified")
            continue
        if _BENCHMARK_RE.search(path):
            skip("benchmark")
            continue
        text, reason = check_text(files[path], config)
        if text is None:
            skip(reason)
            continue
        if guard.matches(text):
            skip("benchmark")
            continue
        kept.append({"path": path, "language": language, "text": text})
    sizes: dict[str, int] = {}
    for f in kept:
        sizes[f["language"]] = sizes.get(f["language"], 0) + len(f["text"])
    if sizes.get("cpp", 0) > sizes.get("c", 0) and "cpp" in languages:
        for f in kept:
            if f["language"] == "c" and f["path"].endswith(".h"):
                f["language"] = "cpp"
    return kept, skipped
