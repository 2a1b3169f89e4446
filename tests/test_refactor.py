"""``infill refactor``: recipes, dry run, atomic writes, backups, JSON, bad input, SIGKILL safety.

Most tests replace Engine.fill_batch with scripted fills (fast, and the fills are known); the
SIGKILL test runs the real CLI with the tiny random model in a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infill.refactor import run as refactor
from infill.cli import main
from infill.engine.fill import Engine
from infill.syntax.languages import grammar
from infill.protocol import Fill, FillResult, Timings
from infill.refactor.recipes import recipe

PY = '''def add(a, b):
    return a + b


class Box:
    def get(self):
        pass

    def put(self, x) -> None:
        """Put."""
        raise NotImplementedError("later")

    def done(self):
        ...
        return 1
'''


def sites(name: str, text: str, lang: str = "python", path: str = "x.py"):
    return [(s.name, text[s.start - 1 : s.start], text[s.start : s.end], s.before) for s in recipe(name).sites(text, grammar(lang), path)]


# ------------------------------------------------------------------------------- recipes


def test_docstrings_sites():
    assert sites("docstrings", PY) == [("add", " ", "", '"""'), ("Box", " ", "", '"""'), ("get", " ", "", '"""'), ("done", " ", "", '"""')]
    [s] = recipe("docstrings").sites("def f():\n    # c\n    x = 1\n", grammar("python"), "x.py")
    assert s.after == '"""\n    '


def test_annotate_sites():
    assert [(n, before) for n, _, _, before in sites("annotate", PY)] == [("add", " -> "), ("get", " -> "), ("done", " -> ")]
    ts = "function f(a: number) { return a }\nfunction g(): void {}\nclass A { constructor(x) {} m(x) { return 1 } }\n"
    assert [(n, b) for n, *_, b in sites("annotate", ts, "typescript", "x.ts")] == [("f", ": "), ("m", ": ")]


def test_bodies_sites():
    assert [(n, old) for n, _, old, _ in sites("bodies", PY)] == [("get", "pass"), ("put", 'raise NotImplementedError("later")')]
    stub = "from typing import overload\n@overload\ndef f(x: int) -> int: ...\ndef g():\n    ...\n"
    assert [n for n, *_ in sites("bodies", stub)] == ["g"]
    assert sites("bodies", stub, path="x.pyi") == []
    rs = "fn f(x: i32) -> i32 { todo!() }\nfn h() { 1 }\n"
    assert [(n, old) for n, _, old, _ in sites("bodies", rs, "rust", "x.rs")] == [("f", "todo!()")]


def test_holes_sites():
    text = "x = <FILL>\ny = <FILL:3> + 1\n"
    got = recipe("holes").sites(text, None, "x.txt")
    assert [(text[s.start : s.end], s.max_tokens) for s in got] == [("<FILL>", 32), ("<FILL:3>", 3)]


# ------------------------------------------------------------------------------- the command


@pytest.fixture
def run(tiny_model_dir, capsys):
    def _run(*args: str):
        rc = main(["refactor", *args, "--model", str(tiny_model_dir), "--device", "cpu", "--steps", "1", "--candidates", "1"])
        out, err = capsys.readouterr()
        return rc, out, err

    return _run


@pytest.fixture
def fills(monkeypatch):
    """Scripted fills: ``script(request, hole) -> (text, valid)``; the default is ("int", True)."""
    box = {"script": lambda request, i: ("int", True), "calls": []}

    def fill_batch(self, requests, *a, **k):
        box["calls"].append(len(requests))
        out = []
        for r in requests:
            got = [box["script"](r, i) for i in range(len(r.holes))]
            out.append(FillResult(fills=[Fill(text=t, score=-1.0, valid=v) for t, v in got], timings=Timings(), model="fake"))
        return out

    monkeypatch.setattr(Engine, "fill_batch", fill_batch)
    return box


def tree(tmp_path: Path, n: int = 3, text: str = PY) -> list[Path]:
    out = []
    for i in range(n):
        p = tmp_path / "src" / f"m{i}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        out.append(p)
    return out


def test_dry_run_changes_nothing(run, fills, tmp_path):
    files = tree(tmp_path)
    rc, out, err = run("annotate", str(tmp_path / "src"), "--batch", "4")
    assert rc == 0, err
    assert all(f.read_text() == PY for f in files)
    assert out.count("+++ b/") == 3 and "+def add(a, b) -> int:" in out
    assert "sites/s" in err and "filled" in err
    assert fills["calls"] == [1, 1, 1]  # 3 sites per file, --batch 4: one file per engine call


def test_write_applies_valid_edits_and_keeps_mode(run, fills, tmp_path):
    files = tree(tmp_path, 2)
    files[0].chmod(0o640)
    fills["script"] = lambda r, i: ("int", True) if r.path.endswith("m0.py") else ("(((", False)
    rc, out, err = run("annotate", str(tmp_path / "src"), "--write")
    assert rc == 1 and out == ""  # m1's fills do not parse: rejected
    assert files[0].read_text() == PY.replace("(a, b):", "(a, b) -> int:").replace("(self):", "(self) -> int:")
    assert files[0].stat().st_mode & 0o777 == 0o640
    assert files[1].read_text() == PY
    assert sorted(p.name for p in (tmp_path / "src").iterdir()) == ["m0.py", "m1.py"]


def test_rejected_site_alone_is_rechecked(run, fills, tmp_path):
    [f] = tree(tmp_path, 1)
    fills["script"] = lambda r, i: (["int", "(((", "int"][i], False)  # the request as a whole is invalid
    rc, _, err = run("annotate", str(f), "--write", "--group", "3")
    assert rc == 1
    assert "def add(a, b) -> int:" in f.read_text() and "def get(self):" in f.read_text()


def test_changed_file_is_not_written(run, fills, tmp_path):
    [f, g] = tree(tmp_path, 2)

    def script(r, i):
        f.write_text(PY + "# edited meanwhile\n")
        return "int", True

    fills["script"] = script
    rc, _, err = run("annotate", str(f), str(g), "--write")
    assert rc == 1
    assert f.read_text() == PY + "# edited meanwhile\n"
    assert "-> int" in g.read_text()
    assert f"not written {f}: changed on disk" in err


def test_backup(run, fills, tmp_path):
    [f] = tree(tmp_path, 1)
    assert run("annotate", str(f), "--write", "--backup")[0] == 0
    assert Path(f"{f}.orig").read_text() == PY
    first = f.read_text()
    assert run("docstrings", str(f), "--write", "--backup")[0] == 0
    assert Path(f"{f}.orig.1").read_text() == first
    g = tree(tmp_path / "other", 1)[0]
    assert run("annotate", str(g), "--write", "--backup-dir", str(tmp_path / "bak"))[0] == 0
    assert [p.read_text() for p in (tmp_path / "bak").rglob("m0.py")] == [PY]


def test_json(run, fills, tmp_path):
    [f] = tree(tmp_path, 1)
    (tmp_path / "src" / "bin.py").write_bytes(b"x\0y")
    rc, out, _ = run("bodies", str(tmp_path / "src"), "--json")
    records = [json.loads(line) for line in out.splitlines()]
    assert rc == 1  # the binary file was skipped
    sites_ = [r for r in records if r["status"] != "skipped"]
    assert [(r["name"], r["old"], r["new"], r["status"], r["line"]) for r in sites_] == [
        ("get", "pass", "int", "proposed", 7), ("put", 'raise NotImplementedError("later")', "int", "proposed", 11)]
    assert [r["reason"] for r in records if r["status"] == "skipped"] == ["binary file (contains NUL bytes)"]
    assert f.read_text() == PY


def test_holes_and_user_query(run, fills, tmp_path):
    h = tmp_path / "h.py"
    h.write_text("x = <FILL>\ny = <FILL:2>\n")
    assert run("holes", str(h), "--write")[0] == 0
    assert h.read_text() == "x = int\ny = int\n"
    q = tmp_path / "q.scm"
    q.write_text("(return_statement (_) @hole)\n")
    [f] = tree(tmp_path, 1)
    rc, out, _ = run("query", str(q), str(f))
    assert rc == 0 and "-    return a + b\n+    return int\n" in out and "+        return int\n" in out


def test_bad_inputs_are_skipped(run, fills, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "ok.py").write_text(PY)
    (d / "bin.py").write_bytes(b"def f():\0\n")
    (d / "latin.py").write_bytes("x = 'caf\u00e9'\n".encode("latin-1"))
    (d / "big.py").write_text("def f():\n    pass\n" + "#" * 5000 + "\n")
    os.symlink("loop2.py", d / "loop1.py")
    os.symlink("loop1.py", d / "loop2.py")
    (d / "locked.py").write_text(PY)
    (d / "locked.py").chmod(0)
    rc, _, err = run("bodies", str(d), str(tmp_path / "missing.py"), "--max-file-bytes", "4000", "--write")
    assert rc == 1
    assert (d / "ok.py").read_text() == PY.replace("pass", "int").replace("raise NotImplementedError(\"later\")", "int")
    for name, why in [("bin.py", "binary"), ("latin.py", "not UTF-8"), ("big.py", "too large"), ("loop1.py", "ymlink loop"),
                      ("missing.py", "no such file")]:
        assert any(name in line and why in line for line in err.splitlines() if "skipped" in line), (name, err)
    if os.geteuid() != 0:
        assert "locked.py: permission denied" in err


@pytest.mark.parametrize("args, message", [
    (["rename", "x.py"], "unknown recipe"),
    (["query", "Q", "x.py"], "bad python query"),
    (["query", "NOHOLE", "x.py"], "no @hole"),
    (["docstrings", "x.py", "--interactive"], "needs a terminal"),
])
def test_usage_errors_exit_2(run, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    Path("x.py").write_text(PY)
    Path("Q").write_text("(function_definition @x")
    Path("NOHOLE").write_text("(function_definition) @x")
    rc, out, err = run(*args)
    assert rc == 2 and out == "" and message in err
    assert Path("x.py").read_text() == PY


def test_gitignore_and_globs(run, fills, tmp_path):
    files = tree(tmp_path, 2)
    (tmp_path / "src" / "gen").mkdir()
    gen = tmp_path / "src" / "gen" / "g.py"
    gen.write_text(PY)
    (tmp_path / ".gitignore").write_text("gen/\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    rc, _, _ = run("annotate", str(tmp_path / "src"), "--write", "--exclude", "m1.py")
    assert rc == 0
    assert "-> int" in files[0].read_text() and files[1].read_text() == PY and gen.read_text() == PY
    assert run("annotate", str(gen.parent), "--write")[0] == 0  # an ignored directory named on the command line
    assert "-> int" in gen.read_text()


def test_interactive(run, fills, tmp_path, monkeypatch):
    [f] = tree(tmp_path, 1)
    answers = iter(["y", "n", "q"])
    monkeypatch.setattr(refactor, "ask", lambda prompt: next(answers))
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    rc, _, err = run("annotate", str(f), "--interactive")
    assert rc == 0 and "2 edits declined" in err
    assert f.read_text() == PY.replace("(a, b):", "(a, b) -> int:")


# ------------------------------------------------------------------------------- SIGKILL


def test_sigkill_during_write_leaves_whole_files(tiny_model_dir, tmp_path):
    d = tmp_path / "many"
    d.mkdir()
    n = 500
    originals = {}
    for i in range(n):
        text = f"def f{i}(a, b)" + ":\n    return a + b  # " + "x" * 200 + f"\n\n\nX{i} = {i}\n"
        (d / f"m{i:03}.py").write_text(text)
        originals[f"m{i:03}.py"] = text
    cmd = [sys.executable, "-m", "infill", "refactor", "annotate", str(d), "--write", "--no-check", "--max-tokens", "2",
           "--steps", "1", "--candidates", "1", "--batch", "5", "--model", str(tiny_model_dir), "--device", "cpu", "-q"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    names = sorted(originals)
    deadline = time.monotonic() + 60
    changed = 0
    while time.monotonic() < deadline and proc.poll() is None:
        changed = sum((d / name).read_text() != originals[name] for name in names)
        if changed >= 20:  # well into the writes (the whole run takes several seconds)
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    new = 0
    for name in names:
        text, orig = (d / name).read_text(), originals[name]
        if text == orig:
            continue
        head, tail = orig.split(":", 1)
        assert text.startswith(head + " -> ") and text.endswith(":" + tail) and len(text) > len(orig), (name, text)
        new += 1
    assert 20 <= new < n  # killed in the middle of writing
    assert {p.name for p in d.iterdir() if p.name not in originals} <= {p.name for p in d.glob(".*.infill-tmp")}
