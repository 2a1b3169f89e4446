"""Licence reading shared by the registry sources, on top of ``infill.train.corpus``'s rules.

- ``from_expression``: a registry's licence string (npm ``license``, PyPI
  ``License-Expression``): an SPDX expression when it parses as a permissive one, otherwise
  judged as free text (copyleft and unknown licences are refused).
- ``from_text``: a licence file's text (LICENSE, COPYING): the same free-text rules as an
  installed package's ``License`` field.
- ``debian_expression``: a DEP-5 ``License:`` short name expression ("Expat or Apache-2.0",
  "GPL-2+") rewritten with SPDX ids, so the same permissive list judges it.
- ``licence_files`` / ``from_licence_files``: which top-level files of a package hold its
  licence text, and the judgement of the first that names one.

The permissive list and the copyleft pattern are ``corpus.PERMISSIVE_SPDX`` and
``corpus.COPYLEFT_RE``; nothing here widens them.
"""

from __future__ import annotations

import re

from infill.train.corpus import _spdx_ok, classify_license
from infill.train.registry.package import Skip

_UNLICENSED = re.compile(r"^\s*UNLICENSED\s*$", re.IGNORECASE)
_LICENCE_NAME = re.compile(r"^(?:LICEN[CS]E|COPYING|COPYRIGHT|UNLICENSE)(?:[-_.][\w.-]*)?$", re.IGNORECASE)

# Debian short names (lower-cased) whose SPDX id differs.
_DEBIAN_ALIASES = {
    "expat": "MIT", "mit/x11": "MIT", "public-domain": "Public-Domain", "publicdomain": "Public-Domain",
    "boost-1.0": "BSL-1.0", "bsl": "BSL-1.0", "psf-2": "PSF-2.0", "psf": "PSF-2.0", "python": "PSF-2.0",
    "apache-2": "Apache-2.0", "apache": "Apache-2.0", "cc0": "CC0-1.0", "isc-license": "ISC",
    "bsd-2": "BSD-2-Clause", "bsd-3": "BSD-3-Clause", "bsd-4": "BSD-4-Clause", "zlib/libpng": "Zlib",
    "mpl-2": "MPL-2.0", "unicode-dfs-2016": "Unicode-DFS-2016",
}


class _Fields(dict):
    """The two methods ``corpus.classify_license`` asks of a package's metadata."""

    def get_all(self, key: str, default=None):
        value = self.get(key)
        return [value] if value else default


def from_expression(expression: str) -> tuple[str | None, str]:
    """``(label, "")`` for a permissive licence string, ``(None, reason)`` otherwise."""
    if _UNLICENSED.match(expression):
        return None, "proprietary (UNLICENSED)"
    if _spdx_ok(expression):
        return classify_license(_Fields({"License-Expression": expression}))
    return classify_license(_Fields({"License": expression}))


def from_text(text: str) -> tuple[str | None, str]:
    """Judge a licence file's text."""
    return classify_license(_Fields({"License": text}))


def from_metadata(metadata) -> tuple[str | None, str]:
    """Judge core metadata (PKG-INFO): License-Expression, classifiers, License."""
    return classify_license(metadata)


def debian_expression(short: str) -> str:
    """A DEP-5 licence short-name expression with SPDX ids and operators."""
    expr = re.sub(r"\s+with\s+[\w.+-]+(?:\s+exception)?", "", short.strip(), flags=re.IGNORECASE)
    expr = re.sub(r",?\s+or\s+", " OR ", expr, flags=re.IGNORECASE)
    expr = re.sub(r",?\s+and\s+", " AND ", expr, flags=re.IGNORECASE)
    expr = expr.replace(",", " AND ")

    def one(m: re.Match) -> str:
        name = m.group(0)
        if name in ("OR", "AND"):
            return name
        key = name.lower()
        return _DEBIAN_ALIASES.get(key, name)

    return re.sub(r"[^\s()]+", one, expr)


def licence_files(paths: list[str]) -> list[str]:
    """The top-level licence files among ``paths`` (relative, '/'-separated), sorted."""
    return sorted(p for p in paths if "/" not in p and _LICENCE_NAME.match(p))


def from_licence_files(files: dict[str, bytes], reason: str) -> tuple[str, str]:
    """``(label, "<file> file")`` from the first top-level licence file that names a permissive
    licence; ``Skip`` when one is refused, or with ``reason`` when none names a licence."""
    for path in licence_files(list(files)):
        label, why = from_text(files[path].decode("utf-8", "replace"))
        if label:
            return label, f"{path} file"
        if not why.startswith("unknown"):
            raise Skip(f"{path}: {why}")
    raise Skip(reason)
