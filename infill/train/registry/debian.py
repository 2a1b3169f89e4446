"""Go, Rust, C, C++ and Java from Debian source packages (one source per language).

Listing: the suite's ``Sources.xz`` index (downloaded once into the state directory, so a rerun
sees the same index). For a language, the packages are those of ``lists/debian-<lang>.txt``
that the index has, in the list's order, then (Go, Rust, Java) the index's packages that match
the language's rule (a ``golang-`` / ``rust-`` name; Java: built with javahelper, maven- or
gradle-debian-helper), in an order fixed by a hash of the name (a spread sample, the same on
every machine).

Fetch: format "3.0 (quilt)" reads the upstream ``.orig.tar.*`` and the ``.debian.tar.*`` (for
``debian/copyright``), "3.0 (native)" the one tarball; each download's SHA-256 is checked
against the index (a mismatch is a transient failure, retried on the next run). Other formats are skipped with the reason. Licence, per file: a
machine-readable (DEP-5) ``debian/copyright`` gives each path the licence of the last
``Files:`` paragraph matching it, and only files under a permissive licence are kept; a
free-form ``debian/copyright`` falls back to the upstream top-level LICENSE/COPYING text for
the whole package; so does a missing ``.debian.tar.*`` (a partial mirror), after a crate's
``Cargo.toml`` ``license``. A DEP-5 short name that is no SPDX id is judged by the licence text
the file gives for it.

It does not apply Debian's patches, build anything or read binary packages.
"""

from __future__ import annotations

import fnmatch
import hashlib
import lzma
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from infill.train.corpus import COPYLEFT_RE, _spdx_ok
from infill.train.registry import licences
from infill.train.registry.files import read_archive
from infill.train.registry.http import Fetcher, FetchError, NotFound
from infill.train.registry.package import PackageRef, Record, Skip
from infill.train.registry.source import FetchContext, committed_list, list_origin, package_record

MIRROR = "https://deb.debian.org/debian"
SUITE = "trixie"
LANGUAGES = ("go", "rust", "c", "cpp", "java")
_JAVA_HELPERS = re.compile(r"\b(?:javahelper|maven-debian-helper|gradle-debian-helper|maven-repo-helper)\b")


def parse_control(text: str) -> list[dict[str, str]]:
    """Paragraphs of a Debian control-format file (Sources, DEP-5): field -> value, with
    continuation lines joined by newlines (a lone '.' is an empty line)."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        para: dict[str, str] = {}
        key = None
        for line in block.splitlines():
            if line.startswith("#"):
                continue
            if line[:1] in (" ", "\t") and key:
                value = line.strip()
                para[key] += "\n" + ("" if value == "." else value)
            elif ":" in line:
                key, value = line.split(":", 1)
                key = key.strip()
                para[key] = value.strip()
        if para:
            out.append(para)
    return out


# ---------------------------------------------------------------------------- DEP-5


@dataclass(frozen=True, eq=False)
class Copyright:
    """A machine-readable debian/copyright: (patterns, licence expression) in file order, and
    the licence texts it gives (a ``Files`` paragraph's own, or a standalone ``License``
    paragraph's)."""

    paragraphs: tuple[tuple[tuple[str, ...], str], ...]
    texts: dict[str, str]
    _accepted: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> "Copyright | None":
        paras = parse_control(text)
        if not paras or "Format" not in paras[0]:
            return None
        rules, texts = [], {}
        for p in paras:
            if "License" not in p:
                continue
            name, _, body = p["License"].partition("\n")
            if body.strip():
                texts.setdefault(name.strip(), body)
            if "Files" in p:
                rules.append((tuple(p["Files"].split()), name.strip()))
        return cls(tuple(rules), texts) if rules else None

    def licence_of(self, path: str) -> str | None:
        """The licence short-name expression for ``path`` (the last matching paragraph)."""
        found = None
        for patterns, licence in self.paragraphs:
            if any(fnmatch.fnmatchcase(path, pat) for pat in patterns):
                found = licence
        return found

    def accepted(self, expression: str) -> str | None:
        """The SPDX label of a permissive licence expression, else None. A short name that is
        no SPDX id (``curl``, ``BSD-3-clause-Google``) is judged by the licence text this file
        gives for it."""
        if expression not in self._accepted:
            self._accepted[expression] = self._judge(expression)
        return self._accepted[expression]

    def _judge(self, expression: str) -> str | None:
        spdx = licences.debian_expression(expression)
        if _spdx_ok(spdx):
            return spdx
        if COPYLEFT_RE.search(expression) or re.search(r"\s(?:and|or)\s", expression, re.IGNORECASE):
            return None
        text = self.texts.get(expression.strip())
        label = licences.from_text(text)[0] if text else None
        return f"{expression.strip()} ({label})" if label else None


# ---------------------------------------------------------------------------- the index


class SourcesIndex:
    """The suite's Sources index, kept in ``state_dir/debian/`` once downloaded."""

    def __init__(self, state_dir: Path, mirror: str = MIRROR, suite: str = SUITE) -> None:
        self.mirror, self.suite = mirror.rstrip("/"), suite
        self.path = Path(state_dir) / "debian" / f"{suite}-main-Sources.xz"
        self._packages: dict[str, dict[str, str]] | None = None

    @property
    def url(self) -> str:
        return f"{self.mirror}/dists/{self.suite}/main/source/Sources.xz"

    def packages(self, fetcher: Fetcher) -> dict[str, dict[str, str]]:
        """Package name -> its paragraph (downloading the index on first use)."""
        if self._packages is None:
            if not self.path.is_file():
                data = fetcher.get(self.url)
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.path.with_name(self.path.name + f".tmp{os.getpid()}")
                tmp.write_bytes(data)
                os.replace(tmp, self.path)
            text = lzma.decompress(self.path.read_bytes()).decode("utf-8", "replace")
            packages: dict[str, dict[str, str]] = {}
            for para in parse_control(text):
                name = para.get("Package")
                if name and name not in packages:  # the first (newest) entry of a name
                    packages[name] = para
            self._packages = packages
        return self._packages


def _matches_rule(language: str, name: str, para: dict[str, str]) -> bool:
    if language == "go":
        return name.startswith("golang-")
    if language == "rust":
        return name.startswith("rust-")
    if language == "java":
        deps = para.get("Build-Depends", "") + " " + para.get("Build-Depends-Indep", "")
        return bool(_JAVA_HELPERS.search(deps))
    return False


def _spread(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


class Debian:
    """One language's share of Debian's source packages."""

    def __init__(self, language: str, index: SourcesIndex, names: list[str] | None = None) -> None:
        """``names``: the packages listed first (default: ``lists/debian-<language>.txt``)."""
        self.language = language
        self.name = f"debian-{language}"
        self.languages = frozenset({language, "c", "cpp"} if language in ("c", "cpp") else {language})
        self.index = index
        self.names = committed_list(f"{self.name}.txt") if names is None else list(names)
        first = list_origin(f"{self.name}.txt") if names is None else "given names"
        self.origin = f"{first}; then {index.url} by rule, in name-hash order" if language in ("go", "rust", "java") else first

    def listing(self, ctx: FetchContext, n: int) -> list[PackageRef]:
        packages = self.index.packages(ctx.fetcher)
        names = [p for p in self.names if p in packages]
        if len(names) < n:
            chosen = set(names)
            extra = sorted((p for p, para in packages.items() if p not in chosen and _matches_rule(self.language, p, para)),
                           key=_spread)
            names += extra[: n - len(names)]
        return [PackageRef(self.name, p) for p in names[:n]]

    def fetch(self, ref: PackageRef, ctx: FetchContext) -> Record:
        para = self.index.packages(ctx.fetcher)[ref.name]
        version, fmt = para.get("Version", ""), para.get("Format", "")
        entries = [line.split() for line in para.get("Checksums-Sha256", "").splitlines() if line.strip()]
        files = {name: (sha, int(size)) for sha, size, name in entries}
        tarballs = [f for f in files if re.search(r"\.tar\.(?:gz|xz|bz2)$", f)]
        if fmt == "3.0 (quilt)":
            orig = [f for f in tarballs if re.search(r"\.orig\.tar\.", f)]
            deb = [f for f in tarballs if re.search(r"\.debian\.tar\.", f)]
            if len(orig) != 1 or len(deb) != 1:
                raise Skip(f"expected one orig and one debian tarball, found {sorted(files)}")
            upstream, debian_dir = orig[0], deb[0]
        elif fmt == "3.0 (native)" and len(tarballs) == 1:
            upstream, debian_dir = tarballs[0], None
        else:
            raise Skip(f"source format {fmt!r} not read")
        size = sum(files[f][1] for f in (upstream, debian_dir) if f)
        if size > ctx.max_archive_bytes:
            raise Skip(f"archives too large ({size} bytes)")
        base = f"{self.index.mirror}/{para['Directory']}"
        data = self._download(ctx, base, upstream, files[upstream])
        sources, too_large = read_archive(
            data, lambda p: "/" not in p or p == "debian/copyright" or ctx.wanted(p), ctx.corpus.max_file_bytes)
        copyright_text = b""
        if debian_dir:
            try:
                meta, _ = read_archive(self._download(ctx, base, debian_dir, files[debian_dir]),
                                       lambda p: p == "copyright", 10_000_000)
                copyright_text = meta.get("copyright", b"")
            except NotFound:  # a partial mirror: judge the upstream tree's own licence
                pass
        else:
            copyright_text = sources.get("debian/copyright", b"")
            sources = {p: b for p, b in sources.items() if not p.startswith("debian/")}
        url = f"{base}/{upstream}"
        copyright = Copyright.parse(copyright_text.decode("utf-8", "replace"))
        if copyright is None:
            return package_record(self.name, ref, version, url, sources, too_large, _upstream_licence(sources), ctx)
        kept, refused, seen = {}, 0, set()
        for path, blob in sources.items():
            expression = copyright.licence_of(path)
            label = copyright.accepted(expression) if expression else None
            if label:
                kept[path] = blob
                if ctx.wanted(path):
                    seen.add(label)
            elif ctx.wanted(path):
                refused += 1
        if not seen:
            top = copyright.licence_of("a-source-file")
            raise Skip(f"no source file under a permissive licence (Files: * is {top!r})")
        rec = package_record(self.name, ref, version, url, kept, too_large,
                             (" ; ".join(sorted(seen)), "debian/copyright (DEP-5)"), ctx)
        if refused:
            rec.skipped_files["licence not permissive"] = refused
        return rec

    @staticmethod
    def _download(ctx: FetchContext, base: str, filename: str, expected: tuple[str, int]) -> bytes:
        data = ctx.fetcher.get(f"{base}/{filename}", max_bytes=ctx.max_archive_bytes)
        if hashlib.sha256(data).hexdigest() != expected[0]:
            raise FetchError(f"{filename}: SHA-256 does not match the index")
        return data


def _upstream_licence(sources: dict[str, bytes]) -> tuple[str, str]:
    """Without a machine-readable debian/copyright: a crate's ``Cargo.toml`` ``license``, else
    the top-level licence file."""
    if "Cargo.toml" in sources:
        try:
            declared = tomllib.loads(sources["Cargo.toml"].decode("utf-8", "replace")).get("package", {}).get("license")
        except tomllib.TOMLDecodeError:
            declared = None
        if isinstance(declared, str) and declared.strip():
            label, reason = licences.from_expression(declared.replace("/", " OR "))
            if label:
                return label, "Cargo.toml license"
            raise Skip(reason)
    return licences.from_licence_files(sources, "no machine-readable debian/copyright and no licence file")
