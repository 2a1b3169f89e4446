"""Reading and writing users' files safely: exact UTF-8 reads, unified diffs, atomic replaces.

Shared by ``infill fill`` and ``infill refactor`` (cli.py, refactor.py). Nothing here imports
torch. A user's file is never left half-written: the new text goes to a temporary file beside
the target (same permissions and, where allowed, owner), is fsynced, and is renamed over the
target with one ``os.replace``; the directory is fsynced after. A process killed at any moment
leaves the target either as it was or complete, plus at worst a stray ``.NAME.*.infill-tmp``.
"""

from __future__ import annotations

import difflib
import os
import stat
import tempfile
from pathlib import Path

from infill.errors import InputError

TMP_SUFFIX = ".infill-tmp"


def read_text_file(path: str, max_bytes: int | None = None) -> tuple[str, Path, os.stat_result]:
    """Read a UTF-8 text file exactly (no newline translation). InputError for anything else.

    Returns the text, the resolved path (symlinks followed) and its stat before reading.
    ``max_bytes``: a larger file is refused without being read.
    """
    p = Path(path)
    try:
        real = p.resolve(strict=True)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, RuntimeError) as e:
        raise InputError(f"{path}: cannot open ({e.strerror if isinstance(e, OSError) else e})") from None
    if real.is_dir():
        raise InputError(f"{path}: is a directory")
    if not real.is_file():
        raise InputError(f"{path}: not a regular file")
    try:
        st = real.stat()
        if max_bytes is not None and st.st_size > max_bytes:
            raise InputError(f"{path}: too large ({st.st_size} bytes; the limit is {max_bytes})")
        data = real.read_bytes()
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    return decode_text(data, path), real, st


def decode_text(data: bytes, name: str) -> str:
    if b"\0" in data:
        raise InputError(f"{name}: binary file (contains NUL bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{name}: not UTF-8 text (invalid byte at offset {e.start})") from None


def unified_diff(old: str, new: str, path: str) -> str:
    """A unified diff (git style ``a/`` ``b/`` names), keeping CR characters and marking a
    missing final newline with ``\\ No newline at end of file``."""
    name = path.lstrip("/")
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    out = []
    for line in difflib.unified_diff(a, b, f"a/{name}", f"b/{name}"):
        if line.startswith(("---", "+++")):
            out.append(line.rstrip("\n") + "\n")
        elif line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


def changed_on_disk(real: Path, st: os.stat_result, text: str | None = None) -> str | None:
    """Why ``real`` no longer is what was read (its stat, and its text if given); None if it is."""
    try:
        now = real.stat()
    except OSError:
        return "disappeared while filling"
    changed = (now.st_mtime_ns, now.st_size) != (st.st_mtime_ns, st.st_size)
    if not changed and text is not None:
        try:
            changed = real.read_bytes() != text.encode("utf-8")
        except OSError:
            changed = True
    return "changed on disk while filling" if changed else None


def stage(target: Path, text: str, st: os.stat_result) -> Path:
    """Write ``text`` to a fsynced temporary file beside ``target`` with its permissions."""
    try:
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TMP_SUFFIX, dir=target.parent)
    except PermissionError:
        raise InputError(f"{target}: cannot write beside it (permission denied)") from None
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            os.fchmod(f.fileno(), stat.S_IMODE(st.st_mode))
            try:
                os.fchown(f.fileno(), st.st_uid, st.st_gid)
            except (PermissionError, AttributeError):
                pass
            os.fsync(f.fileno())
    except PermissionError:
        tmp.unlink(missing_ok=True)
        raise InputError(f"{target}: cannot write beside it (permission denied)") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def replace_atomic(target: Path, text: str, st: os.stat_result) -> None:
    """Replace ``target`` with ``text`` atomically (stage, rename, fsync the directory)."""
    tmp = stage(target, text, st)
    try:
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(target.parent)


def fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


RELATED_MAX_FILES = 400  # files read for --related, at most (directories walked in sorted order)
RELATED_MAX_BYTES = 256_000  # a larger file is passed over
_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", "target", "build", "dist"})


def read_related(paths: list[str], extensions: tuple[str, ...], exclude: set[Path]) -> list[tuple[str, str]]:
    """(path, text) of the files named, and of the files under the directories named whose
    extension is one of ``extensions``: other files whose lines may serve as a fill's context.

    Hidden, build and dependency folders are not walked; files in ``exclude`` (resolved paths),
    larger than RELATED_MAX_BYTES, binary or not UTF-8 are passed over; at most RELATED_MAX_FILES.
    A path that does not exist is an InputError (the user named it)."""
    found: list[Path] = []
    for name in paths:
        p = Path(name)
        if not p.exists():
            raise InputError(f"{name}: no such file or directory")
        if p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
                found.extend(Path(root) / f for f in sorted(files) if f.rsplit(".", 1)[-1] in extensions and "." in f)
        else:
            found.append(p)
    out, seen = [], set(exclude)
    for p in found:
        if len(out) >= RELATED_MAX_FILES:
            break
        try:
            real = p.resolve(strict=True)
            if real in seen or not real.is_file() or real.stat().st_size > RELATED_MAX_BYTES:
                continue
            seen.add(real)
            out.append((str(p), decode_text(real.read_bytes(), str(p))))
        except (OSError, InputError):
            continue
    return out
