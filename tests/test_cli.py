"""The ``infill`` command line, on real files with a tiny random model (see conftest.py)."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from infill import cli
from infill.cli import main
from infill.engine.fill import Engine

SRC = "def add(a, b):\n    return <FILL>\n\n\ndef sub(a, b):\n    return a - b\n"


@pytest.fixture
def run(tiny_model_dir, capsys):
    """main([...]) with the tiny model on the CPU; returns (rc, stdout, stderr)."""

    def _run(*args: str, model: bool = True):
        argv = list(args)
        if model and argv and argv[0] == "fill":
            argv += ["--model", str(tiny_model_dir), "--device", "cpu"]
        rc = main(argv)
        out, err = capsys.readouterr()
        return rc, out, err

    return _run


@pytest.fixture
def count_batches(monkeypatch):
    """Record every Engine.fill_batch call (the number of requests in each)."""
    calls: list[int] = []
    real = Engine.fill_batch

    def spy(self, requests, *a, **k):
        calls.append(len(requests))
        return real(self, requests, *a, **k)

    monkeypatch.setattr(Engine, "fill_batch", spy)
    return calls


def write(path: Path, text: str | bytes, mode: int | None = None) -> Path:
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    if mode is not None:
        path.chmod(mode)
    return path


def one_error_line(err: str) -> str:
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, err
    assert lines[0].startswith("infill: error: "), err
    assert "Traceback" not in err
    return lines[0]


# --- output modes ------------------------------------------------------------------------------


def test_diff_is_default_and_file_untouched(run, tmp_path):
    f = write(tmp_path / "m.py", SRC)
    rc, out, err = run("fill", str(f))
    assert rc == 0, err
    assert out.startswith(f"--- a/{str(f).lstrip('/')}\n+++ b/")
    assert "-    return <FILL>\n" in out
    assert "<FILL>" not in "".join(l for l in out.splitlines() if l.startswith("+"))
    assert f.read_text() == SRC
    assert "filled 1 hole in 1 file" in err  # the summary


def test_quiet_has_no_summary(run, tmp_path):
    f = write(tmp_path / "m.py", SRC)
    rc, _, err = run("fill", "-q", str(f))
    assert rc == 0 and err == ""


def test_write_replaces_atomically_and_keeps_permissions(run, tmp_path):
    f = write(tmp_path / "m.py", SRC, mode=0o640)
    inode = f.stat().st_ino
    rc, out, err = run("fill", "--write", str(f))
    assert rc == 0, err
    assert out == ""
    new = f.read_text()
    assert "<FILL>" not in new
    assert new.startswith("def add(a, b):\n    return ")
    assert new.endswith("\n\n\ndef sub(a, b):\n    return a - b\n")
    assert stat.S_IMODE(f.stat().st_mode) == 0o640
    assert f.stat().st_ino != inode  # renamed over, not rewritten in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]  # no temporary file left


def test_write_follows_symlink(run, tmp_path):
    f = write(tmp_path / "real.py", SRC)
    link = tmp_path / "link.py"
    link.symlink_to(f)
    rc, _, err = run("fill", "-w", "-q", str(link))
    assert rc == 0, err
    assert link.is_symlink() and "<FILL>" not in f.read_text()


def test_json_lines(run, tmp_path):
    a = write(tmp_path / "a.py", SRC)
    b = write(tmp_path / "b.js", "function f(x) {\n  return <FILL:8>;\n}\nconst y = <FILL:4>;\n")
    rc, out, err = run("fill", "--json", "-q", str(a), str(b))
    assert rc == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["path"] for r in records] == [str(a), str(b)]
    assert [r["language"] for r in records] == ["python", "javascript"]
    assert [len(r["fills"]) for r in records] == [1, 2]
    for r in records:
        assert r["model"] == "tiny-test"
        for fill in r["fills"]:
            assert isinstance(fill["text"], str) and isinstance(fill["score"], float) and "valid" in fill
        t = r["timings"]
        assert t["total_ms"] > 0 and t["steps"] > 0 and "denoise_ms" in t and "tokens_filled" in t
    assert records[1]["holes"][1]["line"] == 4 and records[1]["holes"][1]["max_tokens"] == 4
    assert a.read_text() == SRC


def test_many_files_one_batch(run, tmp_path, count_batches):
    files = [write(tmp_path / f"f{i}.py", SRC) for i in range(3)]
    files.append(write(tmp_path / "two.py", "x = <FILL:4>\ny = <FILL:4>\n"))
    rc, out, err = run("fill", "--write", *map(str, files))
    assert rc == 0, err
    assert count_batches == [4]
    assert "filled" not in err and "wrote 5 holes in 4 files" in err
    assert all("<FILL" not in f.read_text() for f in files)


def test_at_cursor(run, tmp_path):
    text = "def add(a, b):\n    return \n"
    f = write(tmp_path / "m.py", text)
    rc, out, err = run("fill", "--json", "--at", "2:12", "--max-tokens", "6", str(f))
    assert rc == 0, err
    (r,) = [json.loads(l) for l in out.splitlines()]
    assert r["holes"] == [{"start": 26, "end": 26, "max_tokens": 6, "line": 2, "column": 12}]
    rc, out, err = run("fill", "--at", "2:12", "-q", "-w", str(f))
    new = f.read_text()
    assert rc == 0 and new.startswith("def add(a, b):\n    return ") and new.endswith("\n")


def test_at_ignores_markers(run, tmp_path):
    f = write(tmp_path / "m.py", 's = "<FILL>"\n')
    rc, out, _ = run("fill", "--json", "--at", "1:1", str(f))
    assert rc == 0 and json.loads(out)["holes"][0]["start"] == 0


def stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def test_stdin_prints_filled_text(run, monkeypatch):
    stdin(monkeypatch, b"x = 1\r\ny = <FILL:4>\r\nz = 3")
    rc, out, err = run("fill", "-", "--language", "python")
    assert rc == 0, err
    assert out.startswith("x = 1\r\ny = ") and out.endswith("\r\nz = 3")
    assert "<FILL" not in out and "filled 1 hole in stdin" in err


def test_stdin_at_needs_language(run, monkeypatch):
    stdin(monkeypatch, b"x = 1\n")
    rc, _, err = run("fill", "-", "--at", "1:1")
    assert rc == 2 and "--language" in one_error_line(err)
    stdin(monkeypatch, b"x = 1\n")
    rc, out, err = run("fill", "-", "--at", "1:5", "--language", "python", "--json")
    assert rc == 0 and json.loads(out)["path"] == "-"


def test_crlf_and_missing_final_newline_preserved(run, tmp_path):
    f = write(tmp_path / "w.py", b"a = 1\r\nb = <FILL:8>\r\nc = 3")
    rc, _, err = run("fill", "-w", "-q", str(f))
    assert rc == 0, err
    new = f.read_bytes()
    assert new.startswith(b"a = 1\r\nb = ") and new.endswith(b"\r\nc = 3")
    assert new.count(b"\n") == new.count(b"\r\n")


def test_diff_marks_missing_newline(run, tmp_path):
    f = write(tmp_path / "w.py", "x = <FILL:2>")
    rc, out, _ = run("fill", "-q", str(f))
    assert rc == 0 and out.endswith("\\ No newline at end of file\n")


# --- bad input: one line, exit 2, nothing touched ------------------------------------------------


def _bad_model_dir(tiny_model_dir: Path, tmp_path: Path, what: str) -> Path:
    d = tmp_path / f"model-{what}"
    shutil.copytree(tiny_model_dir, d)
    if what == "no-tokenizer":
        (d / "tokenizer.json").unlink()
    elif what == "bad-config":
        (d / "config.json").write_text("{not json")
    elif what == "bad-weights":
        (d / "model.safetensors").write_bytes(b"\x00" * 64)
    elif what == "no-weights":
        (d / "model.safetensors").unlink()
    elif what == "bad-tokenizer":
        (d / "tokenizer.json").write_text('{"x": 1}')
    return d


@pytest.mark.parametrize(
    "case",
    ["missing", "directory", "binary", "latin1", "no-holes", "bad-budget", "no-model", "not-a-model",
     "no-tokenizer", "bad-config", "bad-weights", "no-weights", "bad-tokenizer", "at-out-of-range", "related-missing"],
)
def test_bad_input(case, run, tmp_path, tiny_model_dir):
    good = write(tmp_path / "good.py", SRC)
    before = good.read_bytes()
    args = ["fill", "--write", str(good)]
    extra = []
    target = None
    if case == "missing":
        extra = [str(tmp_path / "nope.py")]
    elif case == "directory":
        (tmp_path / "d").mkdir()
        extra = [str(tmp_path / "d")]
    elif case == "binary":
        target = write(tmp_path / "b.py", b"x = <FILL>\x00\n")
    elif case == "latin1":
        target = write(tmp_path / "l.py", "s = 'café' <FILL>\n".encode("latin-1"))
    elif case == "no-holes":
        target = write(tmp_path / "n.py", "x = 1\n")
    elif case == "bad-budget":
        target = write(tmp_path / "n.py", "x = <FILL:9999>\n")
    elif case == "at-out-of-range":
        args = ["fill", "--write", "--at", "99:1", str(good)]
    elif case == "related-missing":
        args = ["fill", "--write", "--related", str(tmp_path / "no-such-dir"), str(good)]
    if target is not None:
        extra = [str(target)]
        target_before = target.read_bytes()
    argv = args + extra
    if case in ("no-model", "not-a-model", "no-tokenizer", "bad-config", "bad-weights", "no-weights", "bad-tokenizer"):
        if case == "no-model":
            model = tmp_path / "does-not-exist"
        elif case == "not-a-model":
            model = tmp_path / "empty"
            model.mkdir()
        else:
            model = _bad_model_dir(tiny_model_dir, tmp_path, case)
        rc, out, err = run(*argv, "--model", str(model), "--device", "cpu", model=False)
    else:
        rc, out, err = run(*argv)
    one_error_line(err)
    assert out == ""
    assert rc == 2
    assert good.read_bytes() == before
    if target is not None:
        assert target.read_bytes() == target_before


@pytest.mark.parametrize(
    "case", ["missing", "no-model", "no-tokenizer", "bad-config", "bad-weights", "no-holes", "binary"]
)
def test_bad_input_message_is_one_line(case, tmp_path, tiny_model_dir, capsys):
    f = write(tmp_path / "m.py", SRC)
    model = tiny_model_dir
    path = str(f)
    if case == "missing":
        path = str(tmp_path / "nope.py")
    elif case == "no-model":
        model = tmp_path / "nowhere"
    elif case == "no-holes":
        write(f, "x = 1\n")
    elif case == "binary":
        write(f, b"\x00\x01<FILL>")
    elif case != "missing":
        model = _bad_model_dir(tiny_model_dir, tmp_path, case)
    before = f.read_bytes()
    rc = main(["fill", "-w", path, "--model", str(model), "--device", "cpu"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    line = one_error_line(err)
    assert f.read_bytes() == before
    expect = {"missing": "no such file", "no-model": "no such directory", "no-holes": "no <FILL> markers",
              "binary": "binary file", "no-tokenizer": "tokenizer", "bad-config": "config",
              "bad-weights": "safetensors"}[case]
    assert expect in line


def test_argument_errors_exit_2(run, tmp_path, capsys):
    f = write(tmp_path / "m.py", SRC)
    for argv in (["fill", str(f), "--max-tokens", "0"], ["fill", str(f), "--at", "x"], ["fill", str(f), "--write", "--json"],
                 ["fill", str(f), "--policy", "random"], ["fill", str(f), "--device", "tpu"], ["nope"]):
        assert main(argv) == 2, argv
        assert "Traceback" not in capsys.readouterr().err
    for argv in (["fill", "-", "-w"], ["fill", "-", str(f)], ["fill", "--at", "1:1", str(f), str(f)]):
        assert main(argv) == 2, argv
        one_error_line(capsys.readouterr().err)
    assert main(["--help"]) == 0


# --- Ctrl-C ----------------------------------------------------------------------------------------


def test_ctrl_c_during_fill(run, tmp_path, monkeypatch):
    files = [write(tmp_path / f"f{i}.py", SRC) for i in range(2)]

    def interrupted(self, requests, *a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(Engine, "fill_batch", interrupted)
    rc, out, err = run("fill", "--write", *map(str, files))
    assert rc == 130 and out == ""
    assert len(err.strip().splitlines()) == 1 and "interrupted" in err
    assert all(f.read_text() == SRC for f in files)


def test_ctrl_c_while_writing_leaves_all_files(run, tmp_path, monkeypatch):
    files = [write(tmp_path / f"f{i}.py", SRC) for i in range(2)]
    real_stage, calls = cli.stage, []

    def stage(*a):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_stage(*a)

    monkeypatch.setattr(cli, "stage", stage)
    rc, _, _ = run("fill", "--write", *map(str, files))
    assert rc == 130
    assert all(f.read_text() == SRC for f in files)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f0.py", "f1.py"]


def test_file_changed_during_fill_is_not_overwritten(run, tmp_path, monkeypatch):
    f = write(tmp_path / "m.py", SRC)
    real = Engine.fill_batch

    def edit_meanwhile(self, requests, *a, **k):
        f.write_text(SRC + "# edited\n")
        return real(self, requests, *a, **k)

    monkeypatch.setattr(Engine, "fill_batch", edit_meanwhile)
    rc, _, err = run("fill", "--write", str(f))
    assert rc == 2 and "changed on disk" in one_error_line(err)
    assert f.read_text() == SRC + "# edited\n"


# --- other subcommands -------------------------------------------------------------------------


def test_missing_subcommand_module_is_one_line(monkeypatch, capsys):
    monkeypatch.setattr(cli, "_try_import", lambda module: None)
    assert main(["train"]) == 2
    assert "infill.train.loop" in one_error_line(capsys.readouterr().err)


def test_bench_quality_help():
    if cli._try_import("infill.bench.quality") is None:
        pytest.skip("infill.bench.quality is not there yet")
    assert main(["bench", "quality", "--help"]) == 0


# --- a real process ------------------------------------------------------------------------------


def test_subprocess(tmp_path, tiny_model_dir):
    f = write(tmp_path / "m.py", SRC)
    bad = write(tmp_path / "bad.py", b"\xff\xfe<FILL>")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    base = [sys.executable, "-m", "infill", "fill", "--model", str(tiny_model_dir), "--device", "cpu"]
    p = subprocess.run(base + [str(f)], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("--- a/") and "filled 1 hole" in p.stderr
    p = subprocess.run(base + [str(bad)], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2 and p.stderr.startswith("infill: error: ") and len(p.stderr.splitlines()) == 1
    assert bad.read_bytes() == b"\xff\xfe<FILL>"


def test_help_does_not_import_torch():
    code = (
        "import sys\nfrom infill.cli import main\n"
        "assert main(['--help']) == 0 and main(['fill', '--help']) == 0 and main(['fill']) == 2\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


# ----------------------------------------------------------------------------------------------
# Languages (one table: grammars/languages.toml) and fills that do not parse (issue 29).


def test_unknown_extension_is_an_error_unless_unconstrained(run, tmp_path):
    f = write(tmp_path / "notes.kt", "fun main() { val x = <FILL> }\n")
    rc, out, err = run("fill", str(f))
    assert rc == 2 and "no grammar" in one_error_line(err) and "--language" in err and out == ""
    rc, out, err = run("fill", "--no-constrain", str(f))
    assert rc == 0 and "filled unchecked" in err and "+++" in out


def test_language_flag_takes_ids_and_extensions(run, tmp_path):
    f = write(tmp_path / "snippet.txt", "function f(a) {\n  return <FILL:4>\n}\n")
    for given in ("javascript", "js", "javascriptreact"):
        rc, out, err = run("fill", "--json", "--language", given, str(f))
        assert rc == 0 and json.loads(out)["language"] == "javascript"
    rc, out, err = run("fill", "--language", "cobol", str(f))
    assert rc == 2 and "unknown language" in one_error_line(err)


def test_stdin_needs_language(run, monkeypatch):
    stdin(monkeypatch, b"x = <FILL:4>\n")
    rc, out, err = run("fill", "-")
    assert rc == 2 and "stdin needs --language" in one_error_line(err)


@pytest.fixture
def first_fill_invalid(monkeypatch):
    """The engine's verdict on the first fill of each request made 'does not parse' (the CLI's
    reporting is under test, not the model's luck)."""
    import msgspec

    real = Engine.fill_batch

    def judged(self, requests, *a, **k):
        out = real(self, requests, *a, **k)
        return [msgspec.structs.replace(r, fills=[msgspec.structs.replace(r.fills[0], valid=False), *r.fills[1:]]) for r in out]

    monkeypatch.setattr(Engine, "fill_batch", judged)


def test_invalid_fill_is_marked_in_the_diff(run, tmp_path, first_fill_invalid):
    f = write(tmp_path / "a.py", SRC)
    rc, out, err = run("fill", str(f))
    assert rc == 0
    assert out.startswith(f"# infill: {f}:2:12: this fill does not parse\n--- ")
    assert "1 fill does not parse" in err.strip().splitlines()[-1]


def test_write_skips_files_with_invalid_fills(run, tmp_path, first_fill_invalid):
    f = write(tmp_path / "a.py", SRC)
    rc, out, err = run("fill", "--write", str(f))
    assert rc == 1 and f.read_text() == SRC
    assert f"{f} not written" in err and "1 file not written" in err
    rc, out, err = run("fill", "--write", "--allow-invalid", str(f))
    assert rc == 0 and "<FILL>" not in f.read_text() and "written anyway" in err


@pytest.fixture
def fills_say(monkeypatch):
    """The engine's fills replaced by ``fills_say.text``, judged as the engine judges them (the
    CLI's reporting is under test, not the model's luck)."""
    import msgspec

    from infill.syntax.constraint import is_valid

    real = Engine.fill_batch

    class Say:
        text = ""

    def judged(self, requests, *a, **k):
        out = real(self, requests, *a, **k)
        return [msgspec.structs.replace(r, fills=[msgspec.structs.replace(
            f, text=Say.text, valid=is_valid(q.language, q.text, [(h.start, h.end) for h in q.holes], [Say.text]))
            for f in r.fills]) for q, r in zip(requests, out)]

    monkeypatch.setattr(Engine, "fill_batch", judged)
    return Say


GO_CUT = "package x\n\n<FILL>\n\treturn a\n}\n"  # the hole took a function's opening line


def test_valid_fills_in_code_still_broken_around_them_are_marked(run, tmp_path, fills_say):
    f = write(tmp_path / "a.go", GO_CUT)
    fills_say.text = "var b = 1"  # adds no error, and leaves the stray '}'
    rc, out, err = run("fill", str(f))
    assert rc == 0 and out.startswith(f"# infill: {f}: the code around the fills does not parse, as it did not before them")
    assert "1 file still broken around its fills" in err.strip().splitlines()[-1]
    rc, out, err = run("fill", "--json", str(f))
    assert rc == 0 and json.loads(out)["left_broken"] is True and "does not parse, as it did not" in err
    rc, out, err = run("fill", "--write", str(f))  # nothing it adds is broken: written
    assert rc == 0 and f.read_text() == GO_CUT.replace("<FILL>", "var b = 1") and "as it did not before them" in err
    g = write(tmp_path / "b.go", GO_CUT)
    fills_say.text = "func f(a int) int {"  # mends it
    rc, out, err = run("fill", "--json", str(g))
    assert rc == 0 and json.loads(out)["left_broken"] is False and "did not before" not in err


def test_language_table_is_the_extensions_copy():
    """vscode-extension/languages.json and its activation events are grammars/languages.toml's."""
    root = Path(__file__).resolve().parents[1] / "vscode-extension"
    table = cli.language_table()
    assert json.loads((root / "languages.json").read_text()) == table, "run: infill languages --json > vscode-extension/languages.json"
    events = json.loads((root / "package.json").read_text())["activationEvents"]
    assert sorted(events) == sorted(f"onLanguage:{i}" for row in table.values() for i in row["lsp_ids"])


def test_fills_under_the_models_floor_are_marked(run, tiny_model_dir, tmp_path, fills_say):
    """A valid fill scored under the model's floor (its config.json's min_score) is one an editor would
    not show: `infill fill` marks it before the file's diff, counts it in the summary, and --json
    gives the floor beside the scores. Without a floor nothing is marked."""
    import shutil

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    config = json.loads((model / "config.json").read_text())
    f = write(tmp_path / "a.py", "x = 1\ny = <FILL:4>\n")
    fills_say.text = "2"
    for floor in (1.0, None):  # every score is a log-probability: under 1.0
        if floor is None:
            config.pop("min_score", None)
        else:
            config["min_score"] = floor
        (model / "config.json").write_text(json.dumps(config))
        where = ["--model", str(model), "--device", "cpu"]
        rc, out, err = run("fill", str(f), *where, model=False)
        assert rc == 0, err
        marked = f"# infill: {f}:2:5: scored " in out and "under the model's floor (1.000): an editor would not show" in out
        assert marked == (floor is not None) and ("1 fill scored under the model's floor" in err) == (floor is not None), (out, err)
        rc, out, err = run("fill", "--json", str(f), *where, model=False)
        assert json.loads(out)["min_score"] == floor


def test_lookahead_help_names_the_engine_default():
    import argparse

    from infill.args import add_model_options
    from infill.engine.fill import EngineConfig

    p = argparse.ArgumentParser()
    add_model_options(p)
    help_text = next(a.help for a in p._actions if "--lookahead" in a.option_strings)
    assert f"default: {EngineConfig().lookahead}," in help_text
