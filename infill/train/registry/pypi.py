"""Python (and the C, C++ and Rust of its extension modules) from PyPI source distributions.

The packages are the first N of ``lists/pypi.txt`` (most downloaded first). For each: the JSON
API names the latest version's sdist, which is downloaded (tar.gz or zip) and read in memory.
The licence is the sdist's own ``PKG-INFO`` (``License-Expression``, else classifiers and the
``License`` field, judged by ``corpus.classify_license``); when that names no licence, the
top-level LICENSE/COPYING file's text is judged instead. A package with no sdist, a copyleft or
unknown licence, or no usable source file is skipped with the reason.

It does not build, install or import anything, and reads no wheel.
"""

from __future__ import annotations

import email.parser
import json
import urllib.parse

from infill.train.registry import licences
from infill.train.registry.files import read_archive
from infill.train.registry.package import PackageRef, Record, Skip
from infill.train.registry.source import FetchContext, ListedSource, package_record

API = "https://pypi.org/pypi/{name}/json"


class PyPI(ListedSource):
    name = "pypi"
    list_file = "pypi.txt"
    languages = frozenset({"python", "c", "cpp", "rust"})  # maturin / setuptools-rust sdists carry their crates

    def fetch(self, ref: PackageRef, ctx: FetchContext) -> Record:
        api = API.format(name=urllib.parse.quote(ref.name))
        meta = json.loads(ctx.fetcher.get(api))
        version = meta["info"]["version"]
        sdists = [u for u in meta.get("urls", []) if u.get("packagetype") == "sdist"]
        if not sdists:
            raise Skip(f"no sdist for {version}")
        sdist = sdists[0]
        url = urllib.parse.urljoin(api, sdist["url"])  # a mirror may answer with relative links
        if sdist.get("size", 0) > ctx.max_archive_bytes:
            raise Skip(f"sdist too large ({sdist['size']} bytes)")
        data = ctx.fetcher.get(url, max_bytes=ctx.max_archive_bytes)
        files, too_large = read_archive(
            data, lambda p: p == "PKG-INFO" or "/" not in p or ctx.wanted(p), ctx.corpus.max_file_bytes)
        return package_record(self.name, ref, version, url, files, too_large, _licence(files), ctx)


def _licence(files: dict[str, bytes]) -> tuple[str, str]:
    """The accepted licence and where it was read; ``Skip`` when refused or not found."""
    reason = "no PKG-INFO"
    if "PKG-INFO" in files:
        md = email.parser.Parser().parsestr(files["PKG-INFO"].decode("utf-8", "replace"), headersonly=True)
        label, reason = licences.from_metadata(md)
        if label:
            field = "License-Expression" if md.get("License-Expression") else "License / classifiers"
            return label, f"PKG-INFO {field}"
        if not reason.startswith("unknown"):
            raise Skip(reason)
    return licences.from_licence_files(files, reason)
