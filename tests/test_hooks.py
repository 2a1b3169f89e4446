"""The language-hooks seam (infill/syntax/hooks.py): the registry finds a language's hooks, a brace
language needs none (data only), and no general module names a language."""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from pathlib import Path

import pytest

from infill.engine.finish import strict_request
from infill.lang.python import hooks as python_hooks
from infill.lang.python.offside import OffsideContext, OffsideRules
from infill.lang.python.shape import Shape as PythonShape
from infill.protocol import FillRequest, Hole
from infill.syntax import hooks
from infill.syntax.document import Document, hole_context
from infill.syntax.languages import LanguageSpec, grammar, specs
from infill.syntax.steering import Lexer

ROOT = Path(__file__).resolve().parents[1]
GENERAL = ["infill/syntax", "infill/engine", "infill/decode", "infill/model"]


def test_python_hooks_are_found_through_the_registry():
    assert specs()["python"].hooks == "python"  # languages.toml names them
    for name in ("python", "py", ".py", "src/app/main.py"):
        assert hooks.hooks_for(name) is python_hooks.HOOKS
    assert hooks.hooks_for(specs()["python"]) is python_hooks.HOOKS
    assert isinstance(python_hooks.HOOKS, hooks.LanguageHooks) and python_hooks.HOOKS.name == "python"


def test_a_brace_language_without_a_hooks_module_gets_the_default_hooks():
    for name, spec in specs().items():
        if spec.hooks is None and not (ROOT / "infill" / "lang" / name / "hooks.py").exists():
            assert hooks.hooks_for(name) is hooks.DEFAULT, name
    assert hooks.hooks_for(None) is hooks.DEFAULT and hooks.hooks_for("no-such-language") is hooks.DEFAULT


def test_a_new_brace_language_is_data_only():
    """A table alone (here a copy of JavaScript's under a new name) steers brackets and strings
    with the default hooks: no line rules, no shapes, no scaffold, no compiler."""
    js = specs()["javascript"]
    spec = LanguageSpec.from_table("bracelang", {"package": js.package, "function": js.function, "queries": js.queries,
                                                 "brackets": {"(": ")", "[": "]", "{": "}"}, "quotes": ['"', "'"],
                                                 "line_comment": ["//"], "block_comment": [["/*", "*/"]]})
    assert spec.hooks is None and hooks.hooks_for(spec) is hooks.DEFAULT
    g = grammar("javascript")
    text = "function f(a) {\n  return g(a, );\n}\n"
    at = text.index(", )") + 2
    ctx = hole_context(Document(g, text, [(at, at)]), 0)
    assert ctx.lang is None and ctx.base == ("{", "(")
    lx = Lexer(spec, ctx)
    assert lx.rules is None and lx.start.lang is None
    assert lx.accepts(lx.start, "b[0]") and not lx.accepts(lx.start, "b]") and not lx.accepts(lx.start, "b})")
    assert lx.can_end(lx.feed(lx.start, "'x'")[0]) and not lx.can_end(lx.feed(lx.start, "h(1")[0])
    assert lx.owes(lx.start) == [] and lx.head_end(":") is None and not lx.ends_short()
    d = hooks.DEFAULT
    request = FillRequest(text=text, holes=[Hole(at, at, 8)], language="javascript")
    assert d.shape_of(request) == hooks.Shape() and d.first_round(hooks.Shape()) == hooks.Shape()
    assert d.strict(hooks.Shape()) == hooks.Shape(closes=True) and d.scaffold(request, hooks.Shape()) is None
    assert d.lead_widths(hooks.Shape(), 2) == [None, None] and d.head_window(hooks.Shape(closes=True)) is None
    assert d.strict_check(b"x", [(0, 1)]) is None and d.nested_region(None, b"", [(0, 0)]) is None


def test_a_table_that_names_a_missing_hooks_package_fails_loudly():
    spec = replace(specs()["javascript"], name="bracelang2", hooks="no_such_package")
    with pytest.raises(ImportError, match="no_such_package"):
        hooks.hooks_for(spec)


def test_python_owns_its_part_of_the_hole_context_and_the_lexer_state():
    g = grammar("python")
    text = "def f(x):\n    if x:\n        return 1\n    \n"
    at = text.index("    \n") + 4
    ctx = hole_context(Document(g, text, [(at, at)]), 0)
    assert isinstance(ctx.lang, OffsideContext) and ctx.lang.levels == (0, 4, 8)
    lx = Lexer(g.spec, ctx)
    assert isinstance(lx.rules, OffsideRules)
    st = lx.feed(lx.start, "if y:\n        z = 1\n")[0]
    assert st.lang.levels == (0, 4, 8) and st.lang.at_line_start  # the offside rule's state is the hooks'
    assert not lx.accepts(lx.start, "  z = 1")  # indented where no block opens


def test_a_retrys_window_comes_from_the_hooks():
    request = FillRequest(text="x\n", holes=[Hole(0, 0, 100)], language="python")
    assert strict_request(request, PythonShape(head_only=True)).holes[0].max_tokens == python_hooks.HEAD_TOKENS
    assert strict_request(request, PythonShape()).holes[0].max_tokens == 100
    js = FillRequest(text="x\n", holes=[Hole(0, 0, 100)], language="javascript")
    assert strict_request(js, hooks.Shape(closes=True)).holes[0].max_tokens == 100
    assert strict_request(js, hooks.Shape()).options.policy == "left-to-right"


def _general_sources():
    for folder in GENERAL:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _language_names() -> set[str]:
    names = set()
    for spec in specs().values():
        names |= {spec.name, spec.queries, *spec.lsp_ids, *spec.extensions}
    return {n.lower() for n in names}


def test_no_general_module_names_a_language_or_imports_its_rules():
    """infill/syntax, infill/engine, infill/decode and infill/model go through the hooks: no import
    of infill.lang, no comparison with a language's name, id or extension, no language flag."""
    names = _language_names()
    wrong = []
    for path in _general_sources():
        source = path.read_text()
        rel = path.relative_to(ROOT)
        for node in ast.walk(ast.parse(source, str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("infill.lang"):
                wrong.append(f"{rel}: imports {node.module}")
            elif isinstance(node, ast.Import):
                wrong += [f"{rel}: imports {a.name}" for a in node.names if a.name.startswith("infill.lang")]
            elif isinstance(node, ast.Compare):
                for part in (node.left, *node.comparators):
                    if isinstance(part, ast.Constant) and isinstance(part.value, str) and part.value.lower() in names:
                        wrong.append(f"{rel}:{node.lineno}: compares with {part.value!r}")
        for m in re.finditer(r"spec\.indent\b|\.hooks\s*[=!]=|\.name\s*[=!]=\s*['\"]", source):
            wrong.append(f"{rel}: {m.group(0)}")
    assert not wrong, wrong


def test_the_seam_check_sees_what_it_looks_for(tmp_path):
    """The check above would catch the rules it forbids (it is not vacuous)."""
    names = _language_names()
    assert {"python", "py", "javascript", "go"} <= names
    tree = ast.parse('if grammar.name == "python":\n    pass\n')
    compare = next(n for n in ast.walk(tree) if isinstance(n, ast.Compare))
    assert any(isinstance(p, ast.Constant) and p.value in names for p in compare.comparators)
    assert re.search(r"spec\.indent\b", "if g.spec.indent:")
