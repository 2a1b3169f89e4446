"""Context from other files: choosing windows (infill/text/related.py), reading them
(infill/text/files.py read_related), the engine placing them before the prefix, and the CLI's --related."""

from __future__ import annotations

import pytest

from infill.errors import InputError
from infill.protocol import FillRequest, Hole, Snippet
from infill.text import related
from infill.text.files import read_related

HELPERS = "".join(f"def unrelated_{i}(a, b):\n    return a + b\n\n" for i in range(30)) + (
    "def parse_manifest_entry(line, strict_mode):\n"
    "    fields = split_manifest_fields(line)\n"
    "    return ManifestEntry(fields, strict_mode)\n"
)
OTHER = "".join(f"class Widget{i}:\n    colour = 'red'\n" for i in range(20))
CODE = (
    "import helpers\n\n"
    "def load(path, strict_mode=False):\n"
    "    entries = []\n"
    "    for line in open(path):\n"
    "        entry = helpers.parse_manifest_entry(line, strict_mode)\n"
    "        entries.append(entry)\n"
    "    fields = "
)


def test_the_window_that_shares_the_names_before_the_cursor_is_chosen():
    chosen = related.select(related.query_text(CODE, len(CODE)), [("other.py", OTHER), ("helpers.py", HELPERS)], 2000)
    assert chosen, "a window shares names with the code before the cursor"
    best = chosen[-1]  # the best last, nearest the code it serves
    assert best.path == "helpers.py" and "def parse_manifest_entry" in best.text
    assert all(m.path != "other.py" for m in chosen)  # shares no name of 3+ characters
    assert [m.score for m in chosen] == sorted(m.score for m in chosen)


def test_the_budget_overlap_and_empty_cases():
    docs = [("helpers.py", HELPERS), ("copy.py", HELPERS)]
    chosen = related.select(related.query_text(CODE, len(CODE)), docs, 2000)
    assert sum(len(m.text) for m in chosen) <= 2000
    for path in ("helpers.py", "copy.py"):  # no two windows of one document overlap
        firsts = sorted(HELPERS.index(m.text) for m in chosen if m.path == path)
        assert all(b - a >= len("".join(HELPERS.splitlines(True)[: related.WINDOW_LINES])) for a, b in zip(firsts, firsts[1:]))
    assert related.select(related.query_text(CODE, len(CODE)), docs, 10) == []  # no window fits
    assert related.select("x = 1\n", docs, 2000) == []  # nothing to compare with
    assert related.select(CODE, [], 2000) == []


def test_typing_within_a_line_keeps_the_choice():
    docs = [("helpers.py", HELPERS), ("other.py", OTHER)]
    before = related.choose(CODE, len(CODE), docs)
    typed = CODE + "split_manifest_fields(li"
    assert related.choose(typed, len(typed), docs) == before  # the cursor's own line is not the query
    assert related.query_text(CODE, len(CODE)).endswith("entries.append(entry)\n")


def test_windows_cover_the_text_in_whole_lines():
    text = "".join(f"line {i}\n" for i in range(50))
    wins = related.windows(text)
    assert wins[0][0] == 0 and all(w.endswith("\n") for _, w in wins)
    assert {l for _, w in wins for l in w.splitlines()} == set(text.splitlines())
    assert related.windows("") == [] and related.windows("a") == [(0, "a\n")]


def test_a_header_names_each_file_in_the_language_comment():
    assert related.header([("a.py", "x = 1\n"), ("b.py", "y = 2")], "#") == "# a.py\nx = 1\n# b.py\ny = 2\n\n"
    assert related.header([("a.txt", "x\n")], None) == "x\n\n"
    assert related.header([], "//") == ""


def test_read_related_walks_directories_for_the_language(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("def a(): pass\n")
    (tmp_path / "pkg" / "b.js").write_text("function b() {}\n")
    (tmp_path / "pkg" / "bin.py").write_bytes(b"\0\1\2")
    (tmp_path / "pkg" / "node_modules").mkdir()
    (tmp_path / "pkg" / "node_modules" / "c.py").write_text("c = 1\n")
    me = tmp_path / "pkg" / "me.py"
    me.write_text("x = 1\n")
    got = read_related([str(tmp_path / "pkg")], ("py",), {me.resolve()})
    assert [p.rsplit("/", 1)[-1] for p, _ in got] == ["a.py"]  # not itself, not binary, not a dependency folder
    with pytest.raises(InputError, match="no such file"):
        read_related([str(tmp_path / "missing")], ("py",), set())


def test_the_engine_reads_snippets_before_the_prefix_within_their_room(default_engine):
    from dataclasses import replace

    from infill.engine.fill import Engine

    engine = default_engine
    request = FillRequest(text=CODE, holes=[Hole(len(CODE), len(CODE), 16)], language="python",
                          context=[Snippet("other.py", OTHER[:200]), Snippet("helpers.py", HELPERS[-140:])])
    plain = engine.prepare(FillRequest(text=CODE, holes=request.holes, language="python"))
    with_context = engine.prepare(request)
    head = engine.tokenizer.encode(related.header([("other.py", OTHER[:200])], "#")) + engine.tokenizer.encode(
        related.header([("helpers.py", HELPERS[-140:])], "#"))
    assert with_context.segments[0] == head + plain.segments[0]
    assert engine.tokenizer.decode(with_context.segments[0]).startswith("# other.py\nclass Widget0")
    # Too little room: the best snippet (the last) is kept whole, the one before it cut to its first lines that fit.
    best = engine.tokenizer.encode(related.header([("helpers.py", HELPERS[-140:])], "#"))
    tight = Engine(engine.model, engine.tokenizer, replace(engine.config, related_tokens=len(head) - 1), engine.model_id)
    cut = tight.prepare(request).segments[0]
    assert cut[-len(best) - len(plain.segments[0]):] == best + plain.segments[0]
    shorter = engine.tokenizer.decode(cut[: len(cut) - len(best) - len(plain.segments[0])])
    assert shorter.startswith("# other.py\nclass Widget0") and shorter.endswith("\n\n") and len(shorter) < 200
    assert OTHER[:200].startswith(shorter[len("# other.py\n"):-1])  # whole first lines
    off = Engine(engine.model, engine.tokenizer, replace(engine.config, related_tokens=0), engine.model_id)
    assert off.prepare(request).segments[0] == plain.segments[0]
    # A snippet far longer than the room: its first lines, never the whole of it tokenized.
    huge = FillRequest(text=CODE, holes=request.holes, language="python", context=[Snippet("big.py", "x = 1\n" * 200_000)])
    got = engine.tokenizer.decode(engine.prepare(huge).segments[0][: -len(plain.segments[0])])
    assert got.startswith("# big.py\nx = 1\n") and 0 < got.count("x = 1") < 100


def test_a_causal_model_reads_the_lines_after_the_hole_first_where_asked(default_engine):
    from dataclasses import replace

    from infill.engine.fill import Engine

    engine = Engine(default_engine.model, default_engine.tokenizer, replace(default_engine.config, suffix_lines=2),
                    default_engine.model_id)
    text = "def f(x):\n    y = \n    z = y * 2\n    return z + x\n\nprint(f(1))\n"
    at = text.index("y = ") + 4
    request = FillRequest(text=text, holes=[Hole(at, at, 8)], language="python", path="src/calc.py")
    plain = default_engine.prepare(request)
    got = engine.prepare(request)
    head = got.segments[0][: len(got.segments[0]) - len(plain.segments[0])]
    assert engine.tokenizer.decode(head) == "# calc.py (further down)\n    z = y * 2\n    return z + x\n\n"
    assert got.segments[1:] == plain.segments[1:]


def test_a_name_only_another_file_defines_reaches_the_fill(default_engine):
    """The default model completes a call to a function that only a snippet defines."""
    text = "import tools\n\n\ndef main(argv):\n    settings = tools.read_"
    snippet = Snippet("tools.py", "def read_frobnicated_settings(path):\n    with open(path) as f:\n        return parse(f.read())\n")
    hole = [Hole(len(text), len(text), 12)]
    options = dict(language="python")
    without = default_engine.fill(FillRequest(text=text, holes=hole, **options)).fills[0].text
    with_it = default_engine.fill(FillRequest(text=text, holes=hole, context=[snippet], **options)).fills[0].text
    assert with_it.startswith("frobnicated_settings("), with_it
    assert not without.startswith("frobnicated_settings"), without


def test_fill_related_reads_the_files_of_a_directory(tmp_path, capsys):
    """``infill fill --at ... --related DIR``: the fill calls what a file of DIR defines."""
    import json

    from infill.cli import main

    (tmp_path / "tools.py").write_text("def read_frobnicated_settings(path):\n    with open(path) as f:\n        return parse(f.read())\n")
    (tmp_path / "notes.txt").write_text("read_something_else\n")
    main_py = tmp_path / "main.py"
    main_py.write_text("import tools\n\n\ndef main(argv):\n    settings = tools.read_\n")
    rc = main(["fill", str(main_py), "--at", "5:27", "--related", str(tmp_path), "--json", "--device", "cpu", "--threads", "1",
               "--candidates", "1"])
    out = capsys.readouterr().out
    assert rc == 0
    assert json.loads(out)["fills"][0]["text"].startswith("frobnicated_settings("), out


def test_suffix_lines_is_a_model_option():
    import argparse

    from infill.args import add_model_options, engine_settings

    p = argparse.ArgumentParser()
    add_model_options(p)
    assert engine_settings(p.parse_args(["--suffix-lines", "24"]))["suffix_lines"] == 24
    assert "suffix_lines" not in engine_settings(p.parse_args([]))  # the engine's default stands


def test_context_cache_is_a_model_option_and_serve_keeps_more():
    """--context-cache sets EngineConfig.context_cache_tokens; infill serve (many editors' documents)
    defaults to a larger cache than one editor's commands, and the help says both defaults."""
    import argparse

    from infill.args import CONTEXT_CACHE_DEFAULTS, add_model_options, engine_settings
    from infill.engine.fill import EngineConfig
    from infill.serve import server

    p = argparse.ArgumentParser()
    add_model_options(p)
    assert engine_settings(p.parse_args(["--context-cache", "4096"]))["context_cache_tokens"] == 4096
    assert "context_cache_tokens" not in engine_settings(p.parse_args([]))
    server.add_arguments(p)
    assert engine_settings(p.parse_args([]))["context_cache_tokens"] == server.CONTEXT_CACHE > EngineConfig.context_cache_tokens
    assert CONTEXT_CACHE_DEFAULTS == f"{EngineConfig.context_cache_tokens}, infill serve {server.CONTEXT_CACHE}"
