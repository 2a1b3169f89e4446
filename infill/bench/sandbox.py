"""Run one untrusted Python program in a separate, limited subprocess and say whether it passed.

What it does, in layers (each one is best effort; together they stop the accidents that
model-written code causes: endless loops, memory blow-ups, stray writes, forks, network calls):

1. A fresh temporary directory per run, as the program's working directory; removed afterwards.
2. ``python -I -B`` (isolated: no user site, no ``PYTHON*`` variables, no cwd on ``sys.path``;
   no bytecode written), a minimal environment, stdin from ``/dev/null``, stdout and stderr
   into files outside the working directory, read back truncated.
3. Resource limits set in the child before ``exec`` (``preexec_fn``): address space, CPU
   seconds, file size (also caps the output files), no core dumps, and ``RLIMIT_NPROC = 0``
   (no new processes or threads from this process tree; it binds only this tree, but the
   kernel does not enforce it for root).
4. A bootstrap that runs before the program, in the same interpreter, in the manner of
   human-eval's ``reliability_guard``: it disables fork/exec/spawn/system/kill/subprocess,
   file removal and renaming, chdir, sockets and ``ctypes``, refuses to open files for writing
   outside the working directory, and turns ``exit()``/``sys.exit``/``os._exit`` into failures
   so a program cannot fake a pass. Only the bootstrap decides the exit status.
5. A new network namespace with no interfaces (``unshare -rn``) when that works on this machine
   (probed once); otherwise only the bootstrap's socket ban.
6. A wall-clock timeout after which the whole process group gets SIGKILL.

What it does not do: it is not a security boundary against hostile code. A program can reach
around the Python-level guard (``posix`` functions, ``_io``, ``__builtins__`` tricks), and as
root neither file permissions nor ``RLIMIT_NPROC`` stop it; there is no seccomp, no chroot, and
without ``unshare`` no network isolation. Run it in a container or VM for code you distrust.
"""

from __future__ import annotations

import functools
import logging
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

Status = Literal["passed", "failed", "timed out"]

_FAIL_EXIT = 3  # the bootstrap's exit code for "the program raised"


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 3.0  # wall clock, interpreter start-up included (human-eval's default)
    memory_bytes: int = 1 << 30  # RLIMIT_AS
    file_bytes: int = 16 << 20  # RLIMIT_FSIZE: largest file the program (or its output) may write
    output_chars: int = 4096  # how much of stdout (head) and stderr (tail) is kept
    network_namespace: bool = True  # use `unshare -rn` when it works here


@dataclass(frozen=True)
class SandboxResult:
    status: Status
    reason: str  # "" when passed; otherwise the exception line, the signal, or "timed out"
    duration_s: float
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


# Runs in the child before the program. argv[1] is the program file. Keeps private references
# to what it needs, then takes the dangerous parts of the standard library away.
_BOOTSTRAP = r'''
import builtins, os, sys, traceback
_exit, _open, _os_open, _realpath, _sep = os._exit, builtins.open, os.open, os.path.realpath, os.sep
_root = _realpath(os.getcwd())
with _open(sys.argv[1], encoding="utf-8") as f:
    _source = f.read()

def _deny(name):
    def denied(*args, **kwargs):
        raise PermissionError(f"sandbox: {name} is disabled")
    return denied

def _inside(path):
    p = _realpath(path)
    return p == _root or p.startswith(_root + _sep)

def _guarded_open(file, mode="r", *args, **kwargs):
    if not isinstance(file, int) and any(c in mode for c in "wax+") and not _inside(file):
        raise PermissionError(f"sandbox: writing outside the working directory: {file!r}")
    return _open(file, mode, *args, **kwargs)

_WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
def _guarded_os_open(path, flags, *args, **kwargs):
    if flags & _WRITE and not _inside(path):
        raise PermissionError(f"sandbox: writing outside the working directory: {path!r}")
    return _os_open(path, flags, *args, **kwargs)

import io, shutil, subprocess, socket
builtins.open = io.open = _guarded_open
os.open = _guarded_os_open
for _name in ("fork", "forkpty", "vfork", "system", "popen", "posix_spawn", "posix_spawnp",
              "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe",
              "execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe",
              "kill", "killpg", "setsid", "setpgid", "remove", "unlink", "rmdir", "removedirs",
              "rename", "renames", "replace", "truncate", "chdir", "fchdir", "chroot", "chmod",
              "fchmod", "lchmod", "chown", "fchown", "lchown", "link", "symlink", "putenv",
              "unsetenv", "setuid", "setgid", "setreuid", "setregid", "_exit", "abort"):
    if hasattr(os, _name):
        setattr(os, _name, _deny("os." + _name))
for _name in ("rmtree", "move", "chown", "copy", "copy2", "copyfile", "copytree"):
    setattr(shutil, _name, _deny("shutil." + _name))
subprocess.Popen = _deny("subprocess.Popen")
for _name in ("socket", "create_connection", "create_server", "socketpair", "fromfd"):
    setattr(socket, _name, _deny("socket." + _name))
for _name in ("ctypes", "_ctypes", "multiprocessing", "_posixsubprocess", "resource", "psutil"):
    sys.modules[_name] = None
builtins.exit = builtins.quit = _deny("exit")
sys.stdin = None
del io, shutil, subprocess, socket

try:
    exec(compile(_source, "program.py", "exec"), {"__name__": "__main__", "__builtins__": builtins})
except BaseException:  # SystemExit too: leaving early is not passing
    traceback.print_exc()
    sys.stderr.flush()
    _exit(3)
sys.stdout.flush()
sys.stderr.flush()
_exit(0)
'''


def _set_limits(limits: SandboxLimits) -> None:
    """preexec_fn: runs in the forked child before exec; only C calls, no imports, no locks."""
    cpu = int(limits.timeout_s) + 1
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))


def _environment() -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8", "HOME": "/nonexistent"}


@functools.cache
def _unshare_prefix() -> tuple[str, ...]:
    """``("unshare", "-rn")`` if a child can start in a new, empty network namespace here."""
    exe = shutil.which("unshare")
    if exe is None:
        log.info("sandbox: no `unshare`; network is blocked only by the bootstrap")
        return ()
    probe = [exe, "-rn", sys.executable, "-I", "-c", "import socket; socket.if_nameindex()"]
    try:
        done = subprocess.run(
            probe, stdin=subprocess.DEVNULL, capture_output=True, timeout=10, env=_environment(),
            preexec_fn=functools.partial(_set_limits, SandboxLimits()),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.info("sandbox: `unshare -rn` unusable (%s); network is blocked only by the bootstrap", exc)
        return ()
    if done.returncode != 0:
        log.info("sandbox: `unshare -rn` failed (%s); network is blocked only by the bootstrap",
                 done.stderr.decode(errors="replace").strip()[-200:])
        return ()
    return (exe, "-rn")


def _read(path: Path, limit: int, tail: bool) -> str:
    with open(path, "rb") as f:
        if tail:
            f.seek(max(0, path.stat().st_size - limit))
        data = f.read(limit)
    return data.decode("utf-8", errors="replace")


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def run_python(source: str, limits: SandboxLimits = SandboxLimits()) -> SandboxResult:
    """Run ``source`` as a program in a sandboxed subprocess; never raises for what it does."""
    prefix = _unshare_prefix() if limits.network_namespace else ()
    with tempfile.TemporaryDirectory(prefix="infill-sandbox-") as tmp:
        base = Path(tmp)
        work = base / "work"
        work.mkdir()
        program = base / "program.py"
        program.write_text(source, encoding="utf-8")
        out_path, err_path = base / "stdout", base / "stderr"
        command = [*prefix, sys.executable, "-I", "-B", "-c", _BOOTSTRAP, str(program)]
        start = time.monotonic()
        timed_out = False
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                command, cwd=work, env=_environment(), stdin=subprocess.DEVNULL, stdout=out,
                stderr=err, start_new_session=True, close_fds=True,
                preexec_fn=functools.partial(_set_limits, limits),
            )
            try:
                proc.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            _kill_group(proc.pid)  # also reaps anything the program left behind
            returncode = proc.wait()
        duration = time.monotonic() - start
        stdout = _read(out_path, limits.output_chars, tail=False)
        stderr = _read(err_path, limits.output_chars, tail=True)
        shutil.rmtree(work, ignore_errors=True)
    status, reason = _classify(returncode, timed_out, stderr)
    return SandboxResult(status, reason, duration, returncode, stdout, stderr)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _classify(returncode: int, timed_out: bool, stderr: str) -> tuple[Status, str]:
    if timed_out:
        return "timed out", "timed out"
    if returncode == 0:
        return "passed", ""
    if returncode == -signal.SIGXCPU:
        return "timed out", "CPU time limit"
    if returncode < 0:
        name = signal.Signals(-returncode).name
        if returncode == -signal.SIGXFSZ:
            return "failed", f"{name}: file size limit"
        return "failed", f"killed by {name}"
    if returncode == _FAIL_EXIT:
        return "failed", _last_line(stderr) or "failed"
    return "failed", f"exit code {returncode}: {_last_line(stderr)}".rstrip(": ")
