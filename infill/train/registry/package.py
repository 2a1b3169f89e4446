"""What one package contributes to the registry corpus: a reference to it and its record.

A ``PackageRef`` names a package in one source (``pypi``, ``npm``, ``debian-go``, ...), with what
the source's listing already knows about it. A ``Record`` is the result of fetching it: the kept
files (language, path, text) with the licence and where the licence was read, or the reason the
package was skipped. ``Skip`` is how a source says "skip this package, for this reason": a final
answer that is recorded, unlike a network failure. Records are saved and loaded atomically, so
an interrupted run never leaves half of one behind.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path


class Skip(Exception):
    """This package is not used; the message is the recorded reason."""


@dataclass(frozen=True)
class PackageRef:
    source: str  # pypi, npm, debian-go, ...
    name: str
    info: dict = field(default_factory=dict, compare=False, hash=False)  # what the listing knows

    @property
    def key(self) -> str:
        return f"{self.source}:{self.name}"


@dataclass
class Record:
    source: str
    name: str
    version: str = ""
    url: str = ""
    license: str | None = None
    license_source: str = ""  # e.g. "PKG-INFO License-Expression", "debian/copyright (DEP-5)"
    reason: str | None = None  # why skipped; None when files were kept
    files: list[dict] = field(default_factory=list)  # {"path", "language", "text"}
    skipped_files: dict[str, int] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.source}:{self.name}"


def record_path(state_dir: Path, ref: PackageRef) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._+-]", "_", ref.name)
    return Path(state_dir) / "records" / ref.source / f"{safe}.json.gz"


def save_record(path: Path, record: Record) -> None:
    """Write ``record`` to ``path`` atomically (a temporary file, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=6) as fh:
        json.dump(asdict(record), fh, ensure_ascii=False)
    os.replace(tmp, path)


def load_record(path: Path) -> Record | None:
    """The record at ``path``, or None when there is none (or it is unreadable)."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return Record(**json.load(fh))
    except (OSError, EOFError, ValueError, TypeError):
        return None
