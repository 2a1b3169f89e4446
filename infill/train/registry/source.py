"""What every registry source shares: the context a fetch runs in, and turning the files of a
downloaded archive into kept sources plus a licence decision.

A source module (``pypi``, ``npm``, ``debian``) provides a class with ``name`` (the source's
label in records and the manifest), ``languages`` (what it is fetched for), ``origin`` (where
its package list comes from), ``listing`` (which packages, in order) and ``fetch`` (one
package -> ``Record``, or ``Skip``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from typing import Protocol

from infill.train.corpus import CorpusConfig
from infill.train.registry.files import BenchmarkGuard, is_candidate, select_sources
from infill.train.registry.http import Fetcher
from infill.train.registry.package import PackageRef, Record


@dataclass
class FetchContext:
    fetcher: Fetcher
    languages: frozenset[str]
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    guard: BenchmarkGuard = field(default_factory=BenchmarkGuard)
    max_archive_bytes: int = 40_000_000

    def wanted(self, path: str) -> bool:
        return is_candidate(path, self.languages)


class Source(Protocol):
    name: str  # the label of its records and manifest entries
    languages: frozenset[str]  # the languages it is fetched for
    origin: str  # where its list of packages comes from (recorded in the manifest)

    def listing(self, ctx: FetchContext, n: int) -> list[PackageRef]: ...

    def fetch(self, ref: PackageRef, ctx: FetchContext) -> Record: ...


class ListedSource:
    """A source whose packages are the first N names of a list, most wanted first: by default
    the committed ``lists/<list_file>``, or the names given."""

    name: str
    list_file: str

    def __init__(self, names: list[str] | None = None) -> None:
        self.names = committed_list(self.list_file) if names is None else list(names)
        self.origin = list_origin(self.list_file) if names is None else "given names"

    def listing(self, ctx: FetchContext, n: int) -> list[PackageRef]:
        return [PackageRef(self.name, p) for p in self.names[:n]]


def committed_list(filename: str) -> list[str]:
    """Package names from ``lists/<filename>``: one a line, '#' comments, order kept."""
    text = resources.files("infill.train.registry").joinpath("lists", filename).read_text(encoding="utf-8")
    names = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line and line not in names:
            names.append(line)
    return names


def list_origin(filename: str) -> str:
    """The '# origin:' line of a committed list (where its names and their order come from)."""
    text = resources.files("infill.train.registry").joinpath("lists", filename).read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.startswith("# origin:"):
            return line.split(":", 1)[1].strip()
    return filename


def package_record(source: str, ref: PackageRef, version: str, url: str, files: dict[str, bytes],
                   too_large: int, licence: tuple[str, str], ctx: FetchContext) -> Record:
    """The record of a package whose licence was accepted: its kept source files and the
    counts of the files the filters refused (``too_large``: members not even read)."""
    rec = Record(source, ref.name, version=version, url=url, license=licence[0], license_source=licence[1])
    rec.files, rec.skipped_files = select_sources(files, ctx.languages, ctx.corpus, ctx.guard)
    if too_large:
        rec.skipped_files["too large"] = rec.skipped_files.get("too large", 0) + too_large
    return rec
