"""The grammar registry: every language loads its pinned wheel and queries, and parses."""

import logging

import pytest

from infill.syntax import languages

SNIPPETS = {
    "python": "def f(x):\n    return [x, {'a': (1, 2)}]\n",
    "javascript": "function f(x) { return `a${x}b`.length; }\n",
    "typescript": "interface A { x: number }\nconst f = (a: A): number => a.x;\n",
    "tsx": "const App = () => <div className=\"a\">{1}</div>;\n",
    "go": "package main\n\nfunc f(x int) int {\n\treturn x + 1\n}\n",
    "rust": "fn f<'a>(x: &'a str) -> char { let c = '('; c }\n",
    "java": "class A { int f(int x) { return x + 1; } }\n",
    "c": "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 1); return 0; }\n",
    "cpp": "#include <vector>\nint f(std::vector<int> v) { return v.size(); }\n",
}


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_each_language_loads_its_queries_and_parses(name):
    g = languages.grammar(name)
    assert g is not None, f"{name}: grammar wheel missing or broken ({languages.specs()[name].pin})"
    tree = g.parse(SNIPPETS[name].encode())
    assert not tree.root_node.has_error, tree.root_node
    for q in languages.QUERY_NAMES:
        assert g.query(q) is not None
    caps = g.captures("brackets", tree.root_node)
    assert caps.get("bracket"), "bracket query finds the brackets"
    assert all(c.type in g.spec.brackets or c.type in g.spec.brackets.values() for c in caps["bracket"])


def test_every_language_of_the_issue_is_registered():
    assert set(SNIPPETS) <= set(languages.specs())


@pytest.mark.parametrize(
    "key, name",
    [("python", "python"), ("py", "python"), (".pyi", "python"), ("typescriptreact", "tsx"), ("ts", "typescript"),
     ("javascriptreact", "javascript"), ("rs", "rust"), ("cpp", "cpp"), ("hpp", "cpp"), ("h", "c"), ("GO", "go"),
     ("src/main.rs", "rust"), ("C:\\x\\a.java", "java")],
)
def test_lookup_by_lsp_id_extension_or_path(key, name):
    assert languages.spec_for(key).name == name


def test_unknown_language_is_none_and_logged_once(caplog):
    with caplog.at_level(logging.WARNING, logger="infill.syntax.languages"):
        assert languages.grammar("cobol-unknown-2") is None
        assert languages.grammar("cobol-unknown-2") is None
        assert languages.grammar(None) is None
    assert sum("cobol-unknown-2" in r.getMessage() for r in caplog.records) == 1


def test_uninstalled_grammar_degrades(monkeypatch, caplog):
    spec = languages.LanguageSpec.from_table("nolang", {"package": "tree_sitter_not_installed_xyz", "extensions": ["nol"]})
    monkeypatch.setitem(languages.specs(), "nolang", spec)
    monkeypatch.setitem(languages._index(), "nolang", "nolang")
    monkeypatch.setattr(languages, "_grammars", {})
    with caplog.at_level(logging.WARNING, logger="infill.syntax.languages"):
        assert languages.grammar("nolang") is None
    assert "unavailable" in caplog.text


def test_a_parse_from_scratch_is_kept_for_the_same_bytes_and_never_edited():
    from infill.syntax.languages import KEPT_TREES, grammar

    g = grammar("python")
    data = b"def f(x):\n    return x\n"
    tree = g.parse(data)
    assert g.parse(bytes(data)) is tree  # equal bytes, not the same object
    edited = tree.copy()
    edited.edit(start_byte=4, old_end_byte=5, new_end_byte=5, start_point=(0, 4), old_end_point=(0, 5), new_end_point=(0, 5))
    assert g.parse(b"def g(x):\n    return x\n", old_tree=edited) is not g.parse(b"def g(x):\n    return x\n")
    for i in range(KEPT_TREES):
        g.parse(b"x = %d\n" % i)
    assert g.parse(data) is not tree and str(g.parse(data).root_node) == str(tree.root_node)
