"""The validity benchmark on a few tiny JavaScript and Go files, with the tiny random model."""

import argparse
import json

import pytest

from infill.bench import validity
from infill.errors import InputError
from infill.syntax.constraint import is_valid
from infill.syntax.languages import grammar

JS = {
    "lib/math.js": """\
'use strict';

// Small helpers.
function add(a, b) {
  return a + b;
}

function clamp(x, lo, hi) {
  if (x < lo) return lo;
  if (x > hi) return hi;
  return x;
}

module.exports = { add, clamp };
""",
    "lib/list.js": """\
export class List {
  constructor(items) {
    this.items = items || [];
  }

  push(item) {
    this.items.push(item);
    return this;
  }

  get size() {
    return this.items.length;
  }
}
""",
    "lib/broken.js": "function broken( {\n  return 1;\n",  # has errors: never used
}

GO = {
    "src/calc/calc.go": """\
package calc

import "fmt"

// Sum adds the numbers.
func Sum(xs []int) int {
\ttotal := 0
\tfor _, x := range xs {
\t\ttotal += x
\t}
\treturn total
}

func Describe(xs []int) string {
\treturn fmt.Sprintf("%d numbers, sum %d", len(xs), Sum(xs))
}
""",
}


def _write(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.fixture
def sources(tmp_path):
    _write(tmp_path / "src" / "javascript", JS)
    _write(tmp_path / "src" / "go", GO)
    (tmp_path / "src" / "javascript" / "x.min.js").write_text("var a=1;", encoding="utf-8")
    return tmp_path / "src"


def test_only_clean_files_are_used(sources):
    files, stats = validity.load_sources(sources / "javascript", "javascript", 10, 0)
    assert [p for p, _ in files] == ["lib/list.js", "lib/math.js"]
    assert stats == {"found": 3, "scanned": 3, "skipped": 0, "with_errors": 1, "used": 2}


def test_hole_choice_is_deterministic(sources):
    files, _ = validity.load_sources(sources / "javascript", "javascript", 10, 0)
    a = validity.cut_holes(files, 6, seed=0)
    b = validity.cut_holes(files, 6, seed=0)
    c = validity.cut_holes(files, 6, seed=1)
    assert a == b and a != c and len(a) == 6
    assert {h.kind for h in a} == {"line", "rest"}
    for h in a:
        assert h.reference and "\n" not in h.reference and h.text != h.original
        assert h.text[:h.start] + h.reference + h.text[h.start:] == h.original
        assert not h.reference.lstrip().startswith("//")
        if h.kind == "line":  # the whole line after its indentation
            assert h.original[:h.start].endswith(("\n", " ", "\t")) and h.original[h.end] == "\n"


def test_inside_holes_are_what_a_pair_of_brackets_on_the_line_holds(sources):
    files, _ = validity.load_sources(sources / "javascript", "javascript", 10, 0)
    cuts = validity.cut_holes(files, 6, seed=0, kinds=["inside"], language="javascript")
    assert len(cuts) == 6 and {c.kind for c in cuts} == {"inside"}
    for c in cuts:  # the opener before the hole, its closer right after it, on one line
        assert c.reference and "\n" not in c.reference
        opener, closer = c.original[c.start - 1], c.original[c.end]
        assert (opener, closer) in {("(", ")"), ("[", "]"), ("{", "}")}, (c.path, c.line, c.reference)
    assert validity.cut_holes(files, 6, seed=0, kinds=["inside"], language="javascript") == cuts
    with pytest.raises(InputError):
        validity.cut_holes(files, 6, seed=0, kinds=["inside"])  # which grammar finds the brackets?


def test_string_holes_are_the_text_of_a_string_literal_on_the_line(sources):
    files, _ = validity.load_sources(sources / "go", "go", 10, 0)
    cuts = validity.cut_holes(files, 2, seed=0, kinds=["string"], language="go")  # the file's two lines with one
    assert {c.reference for c in cuts} == {"fmt", "%d numbers, sum %d"} and {c.kind for c in cuts} == {"string"}
    for c in cuts:
        assert c.original[c.start - 1] == c.original[c.end] == '"'


PY_BLOCK = "import os\n\n\ndef f(x):\n    y = x + 1\n    if y > 2:\n        return y\n    # done\n    return 0\n"


def test_block_spans_are_runs_of_whole_statements_from_a_line_start():
    g = grammar("python")

    def spans(needle):
        s = PY_BLOCK.index(needle)
        return [PY_BLOCK[a:b] for a, b in validity._contents(g, "block", PY_BLOCK, s, PY_BLOCK.index("\n", s))]

    # From the line's start (its indentation goes with the hole) to the end of a later statement's line;
    # a comment between statements goes with them.
    assert spans("y = x + 1") == ["    y = x + 1\n    if y > 2:\n        return y",
                                  "    y = x + 1\n    if y > 2:\n        return y\n    # done\n    return 0"]
    assert spans("if y > 2") == ["    if y > 2:\n        return y", "    if y > 2:\n        return y\n    # done\n    return 0"]
    assert spans("return y") == spans("return 0") == []  # one line: the line kinds' holes
    assert spans("def f") == [PY_BLOCK[PY_BLOCK.index("def f"):-1]]  # the whole function: 6 lines
    assert spans("import os") == []  # the next statement ends 9 lines down


def test_block_holes_cut_whole_lines_and_leave_the_rest_intact(sources):
    files, _ = validity.load_sources(sources / "javascript", "javascript", 10, 0)
    cuts = validity.cut_holes(files, 4, seed=0, kinds=["block"], language="javascript")
    assert len(cuts) == 4 and {c.kind for c in cuts} == {"block"}
    for c in cuts:
        assert c.start == 0 or c.original[c.start - 1] == "\n", (c.path, c.line)  # a line's start
        assert c.original[c.end] == "\n"  # a line's end: the newline stays
        assert 2 <= c.reference.count("\n") + 1 <= 6
        assert c.original.count("\n", 0, c.start) == c.line - 1
        assert c.text[:c.start] + c.reference + c.text[c.start:] == c.original
        assert c.text[c.start] == "\n"  # the cut leaves one empty line
    assert validity.cut_holes(files, 4, seed=0, kinds=["block"], language="javascript") == cuts
    assert validity.cut_holes(files, 4, seed=3, kinds=["block"], language="javascript") != cuts
    with pytest.raises(InputError):
        validity.cut_holes(files, 4, seed=0, kinds=["block"])  # which grammar finds the statements?


def test_edit_similarity_is_twice_the_common_subsequence_over_the_lengths():
    assert validity.lcs_length("path, pathfile", "path") == 4
    assert validity.lcs_length("abcbdab", "bdcaba") == 4  # the textbook pair
    assert validity.edit_similarity("path", "path") == 1.0 and validity.edit_similarity("", "") == 1.0
    assert validity.edit_similarity("path, pathfile", "path") == pytest.approx(2 * 4 / 18)
    assert validity.edit_similarity("xyz", "abc") == 0.0


def test_judge_agrees_with_tree_sitter(sources):
    files, _ = validity.load_sources(sources / "go", "go", 10, 0)
    text = files[0][1]
    start = text.index("total += x")
    cut = validity.Cut("calc.go", text, start, start + len("total += x"), "line", 9)
    g = grammar("go")

    def tree_sitter_ok(fill):
        return not g.parse((cut.text[:cut.start] + fill + cut.text[cut.start:]).encode()).root_node.has_error

    for fill, expected in [("total += x", True), ("total -= 2 * x", True), ("total += (x", False), ("}}", False)]:
        judged = validity.judge("go", cut, fill)
        assert judged["valid"] is expected and tree_sitter_ok(fill) is expected, fill


def test_a_fill_that_adds_no_error_but_leaves_the_cuts_break_is_not_clean():
    # The hole took a block's opening line: its closer is stray in the cut document, and only a
    # fill that opens the block again mends it.
    original = "package x\n\nfunc f(a int) int {\n\treturn a\n}\n"
    start = original.index("func")
    end = original.index("\n", start)
    cut = validity.Cut("f.go", original, start, end, "line", 3)
    assert validity.judge("go", cut, "var b = 1") == {"valid": False, "valid_cut": True, "clean_cut": False}
    assert validity.judge("go", cut, "func g(a int) int {") == {"valid": True, "valid_cut": True, "clean_cut": True}


def test_the_headline_is_judged_in_the_whole_file_not_the_engines_region():
    # A block hole took a decorated method's definition: left empty, the decorator decorates the
    # next method, and the file parses. The region the engine judges (that method, its decorator
    # last) ends with an error there, so a region's verdict would call the file broken.
    original = ("class TestT:\n    def test_z(self):\n        assert 1\n\n    @mark.parametrize(\n        \"x\", [1, 2]\n"
                "    )\n    def test_a(self, x):\n        assert x\n\n    def test_b(self):\n        assert True\n")
    start = original.index("    def test_a")
    end = original.index("\n    def test_b")
    cut = validity.Cut("t.py", original, start, end, "block", 8)
    assert not is_valid("python", original, [(start, end)], [""]), "the engine's region is judged"
    assert validity.judge("python", cut, "")["valid"] is True
    assert validity.judge("python", cut, "    def test_a(self, x:")["valid"] is False


def test_run_writes_summary_and_records(tiny_engine, sources, tmp_path):
    out = tmp_path / "out"
    summary = validity.run_validity(tiny_engine, language="js", sources=sources, holes=4, max_tokens=6, seed=0,
                                    out_dir=out, progress=False)
    assert summary["language"] == "javascript" and summary["n_holes"] == 4
    assert summary["sources"]["files"]["used"] == 2 and summary["sources"]["dir"].endswith("javascript")
    assert 0.0 <= summary["empty_fill_validity"] <= 1.0
    for mode in ("constrained", "unconstrained"):
        m = summary["metrics"][mode]
        for key in ("validity", "validity_cut", "exact_match", "exact_match_stripped", "mean_latency_ms"):
            assert m[key] is not None and m[key] >= 0, (mode, key)
        assert m["engine_errors"] == 0
    assert summary["metrics"]["unconstrained"]["engine_validity"] is None
    assert summary["metrics"]["unconstrained"]["engine_valid_left_broken"] == 0
    assert "machine" in summary and "settings" in summary
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 8 and {r["mode"] for r in records} == {"constrained", "unconstrained"}
    assert all(isinstance(r["rounds"], int) and r["rounds"] >= 1 for r in records)  # a retry or branches: more
    assert json.loads((out / "summary.json").read_text())["n_holes"] == 4
    # The same holes in both modes.
    by_mode = {m: [(r["path"], r["start"], r["reference"]) for r in records if r["mode"] == m]
               for m in ("constrained", "unconstrained")}
    assert by_mode["constrained"] == by_mode["unconstrained"]
    # The constrained records' holes cut again from the sources, as the offline scripts read them
    again = list(validity.recorded_cuts([tmp_path], sources))
    assert [(r["path"], r["start"], r["reference"]) for _, r, _ in again] == by_mode["constrained"]
    assert all(cut.reference == r["reference"] and cut.text == cut.original[: r["start"]] + cut.original[r["end"] :]
               for _, r, cut in again)


@pytest.mark.parametrize("contexts, before_each", [("cold", ["forget"]), ("warm", ["forget", "fill", "forget-fills"])])
def test_each_timed_batch_starts_from_the_same_state_in_either_mode(tiny_engine, sources, tmp_path, contexts, before_each):
    """The mode that goes first would leave its contexts' states and its fills (draft sources) to the
    other: each batch starts from nothing, or after the same batch filled once, its fills forgotten."""
    calls = []

    class Forgetful:
        model_id = "forgetful"

        def fill_batch(self, requests):
            calls.append("fill")
            return tiny_engine.fill_batch(requests)

        def forget(self, contexts=True):
            calls.append("forget" if contexts else "forget-fills")

    summary = validity.run_validity(Forgetful(), language="js", sources=sources, holes=3, max_tokens=6, seed=0,
                                    out_dir=tmp_path / "out", progress=False, batch_size=1, contexts=contexts)
    timed = calls[2:]  # after the untimed warm-up, one per mode
    assert timed == (before_each + ["fill"]) * 6 and summary["settings"]["contexts"] == contexts
    with pytest.raises(InputError):
        validity.run_validity(Forgetful(), language="js", sources=sources, holes=1, out_dir=tmp_path / "x",
                              progress=False, contexts="lukewarm")


def test_related_files_and_one_mode(tiny_engine, sources, tmp_path):
    """--related: each hole reads the other files of its package (never its own); --modes constrained alone."""
    seen = []

    class Spy:
        model_id = "spy"

        def fill_batch(self, requests):
            seen.extend(requests)
            return tiny_engine.fill_batch(requests)

    summary = validity.run_validity(Spy(), language="js", sources=sources, holes=4, max_tokens=6, seed=0,
                                    out_dir=tmp_path / "out", progress=False, related_files=True, modes=["constrained"])
    assert list(summary["metrics"]) == ["constrained"] and summary["settings"]["related_files"]
    assert 1 <= summary["related"]["holes_with_context"] <= 4  # a hole whose lines before share no name gets none
    assert any(r.context for r in seen)
    for r in seen:
        assert r.options.constrained
        assert all(s.path != r.path and s.path.startswith("lib/") for s in r.context)
    with pytest.raises(InputError):
        validity.run_validity(tiny_engine, language="js", sources=sources, holes=1, out_dir=tmp_path / "x",
                              progress=False, modes=["sideways"])


def test_cli_main_runs_each_language(tiny_engine, sources, tmp_path, capsys):
    parser = argparse.ArgumentParser()
    validity.add_arguments(parser)
    args = parser.parse_args(["javascript", "go", "--sources", str(sources), "--holes", "2", "--max-tokens", "4",
                              "--out", str(tmp_path / "out")])
    assert validity.main(args, tiny_engine) == 0
    for lang in ("javascript", "go"):
        assert json.loads((tmp_path / "out" / lang / "summary.json").read_text())["language"] == lang
    assert "unconstrained" in capsys.readouterr().out


def test_bad_inputs(tmp_path):
    with pytest.raises(InputError):
        validity.language_name("cobol")
    with pytest.raises(InputError):
        validity.load_sources(tmp_path / "nowhere", "go", 10, 0)
    (tmp_path / "bad.go").write_text("package x\nfunc (\n", encoding="utf-8")
    with pytest.raises(InputError):
        validity.load_sources(tmp_path, "go", 10, 0)


def test_the_copy_the_previous_line_baseline():
    from infill.bench.validity import baseline_similarity, previous_line

    text = "def f(x):\n    y = x + 1\n\n    return y\n"
    hole = text.index("return")
    assert previous_line(text, hole) == "y = x + 1"  # blank lines skipped, from the hole's column
    assert previous_line(text, text.index("    return")) == "    y = x + 1"
    assert previous_line(text, 3) == ""  # nothing above the first line
    assert baseline_similarity(text, hole, "return y") == round(2 * 1 / (9 + 8), 4)  # LCS: one "y"
    assert baseline_similarity(text, hole, "y = x + 2") == round(2 * 8 / 18, 4)
