"""JavaScript and TypeScript from npm package tarballs.

The packages are the first N of ``lists/npm.txt`` (most downloaded first). For each: the
registry's ``/<name>/latest`` document names the tarball, which is downloaded and read in
memory. The licence is the tarball's own ``package.json`` (``license``, a string or
``{"type"}``, or the old ``licenses`` list, judged by ``licences.from_expression``); when it
names none ("SEE LICENSE IN ...", absent), the top-level LICENSE file's text is judged instead.
``UNLICENSED``, copyleft and unknown licences skip the package with the reason.

It does not install packages or follow dependencies.
"""

from __future__ import annotations

import json
import urllib.parse

from infill.train.registry import licences
from infill.train.registry.files import read_archive
from infill.train.registry.package import PackageRef, Record, Skip
from infill.train.registry.source import FetchContext, ListedSource, package_record

REGISTRY = "https://registry.npmjs.org"


class Npm(ListedSource):
    name = "npm"
    list_file = "npm.txt"
    languages = frozenset({"javascript", "typescript", "tsx"})

    def fetch(self, ref: PackageRef, ctx: FetchContext) -> Record:
        api = f"{REGISTRY}/{urllib.parse.quote(ref.name, safe='@')}/latest"
        latest = json.loads(ctx.fetcher.get(api))
        version = latest.get("version", "")
        url = (latest.get("dist") or {}).get("tarball")
        if not url:
            raise Skip("no tarball")
        url = urllib.parse.urljoin(api, url)
        data = ctx.fetcher.get(url, max_bytes=ctx.max_archive_bytes)
        files, too_large = read_archive(data, lambda p: "/" not in p or ctx.wanted(p), ctx.corpus.max_file_bytes)
        return package_record(self.name, ref, version, url, files, too_large, _licence(files), ctx)


def _declared(package: dict) -> str:
    """The licence string package.json declares ('' when none)."""
    lic = package.get("license")
    if isinstance(lic, dict):
        lic = lic.get("type")
    if isinstance(lic, str) and lic.strip():
        return lic.strip()
    old = package.get("licenses")
    if isinstance(old, list):
        types = [x.get("type") if isinstance(x, dict) else x for x in old]
        types = [t for t in types if isinstance(t, str) and t.strip()]
        if types:
            return " OR ".join(f"({t})" if " " in t else t for t in types)
    return ""


def _licence(files: dict[str, bytes]) -> tuple[str, str]:
    reason = "no package.json"
    if "package.json" in files:
        try:
            package = json.loads(files["package.json"].decode("utf-8", "replace"))
        except ValueError:
            package = {}
        declared = _declared(package) if isinstance(package, dict) else ""
        reason = "no licence in package.json"
        if declared and not declared.upper().startswith("SEE LICENSE"):
            label, reason = licences.from_expression(declared)
            if label:
                return label, "package.json license"
            if not reason.startswith("unknown"):
                raise Skip(reason)
    return licences.from_licence_files(files, reason)
