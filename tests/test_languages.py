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


def test_one_edit_names_the_span_that_changed_and_gives_up_past_its_limit():
    import os
    import random

    from infill.syntax import languages
    from infill.syntax.languages import one_edit

    rng = random.Random(5)
    for chunk in (3, 4096):  # a chunk smaller than the texts, so that both the chunks and the halving run
        languages._CHUNK, old_chunk = chunk, languages._CHUNK
        try:
            for _ in range(300):
                old = bytes(rng.choice(b"ab\n") for _ in range(rng.randrange(0, 60)))
                s, e = sorted(rng.randrange(0, len(old) + 1) for _ in range(2))
                new = old[:s] + bytes(rng.choice(b"ab\n") for _ in range(rng.randrange(0, 5))) + old[e:]
                shared = len(os.path.commonprefix([old, new]))
                shared += len(os.path.commonprefix([old[shared:][::-1], new[shared:][::-1]]))
                edit = one_edit(old, new, 100)
                if edit is None:  # more changed than they share
                    assert max(len(old), len(new)) - shared > shared
                    continue
                start, old_end, new_end = edit
                assert start + len(old) - old_end == shared
                assert old[:start] + new[start:new_end] + old[old_end:] == new
                assert (start == min(len(old), len(new))) or old[start] != new[start]  # all the shared start kept
        finally:
            languages._CHUNK = old_chunk
    assert one_edit(b"x" * 50, b"y" * 50, 10) is None and one_edit(b"x", b"x" * 50, 10) is None
    assert one_edit(b"x" * 5000 + b"ab" + b"y" * 5000, b"x" * 5000 + b"aXb" + b"y" * 5000, 10) == (5001, 5001, 5002)


def test_a_keystroke_reparses_from_the_kept_tree_and_gets_the_parse_from_scratch(monkeypatch):
    from infill.syntax.languages import Grammar, grammar

    seen = []
    real = Grammar.parser

    class Recording:
        def __init__(self, parser):
            self.parser = parser

        def parse(self, data, old_tree=None):
            seen.append(old_tree is not None)
            return self.parser.parse(data, old_tree=old_tree) if old_tree is not None else self.parser.parse(data)

    monkeypatch.setattr(Grammar, "parser", lambda self: Recording(real(self)))
    for lang, pre, typed, post in (("python", "import os\n\n\ndef f(x):\n", "    return g(x, [1, 2])\n", "\n\nclass A:\n    pass\n"),
                                   ("javascript", "const a = 1;\nfunction f(x) {\n", "  return g(x, {a: [1, 2]});\n", "}\nf(2);\n")):
        g = grammar(lang)
        fresh = type(real(g))(g.language)
        seen.clear()
        g._trees.clear()
        g.parse((pre + post).encode())
        assert seen == [False]
        broken = 0
        for k in range(1, len(typed) + 1):
            data = (pre + typed[:k] + post).encode()
            seen.clear()
            tree, theirs = g.parse(data), fresh.parse(data)
            assert str(tree.root_node) == str(theirs.root_node)
            # incremental from the keystroke before; parsed from scratch again where it has an error
            assert seen == ([True, False] if theirs.root_node.has_error else [True])
            broken += theirs.root_node.has_error
        assert 0 < broken < len(typed)  # both ways taken
        far = ("# " + "z" * 400 + "\n" + pre + post).encode()  # an edit larger than EDIT_BYTES: from scratch
        g.parse(far)
        assert seen[-1] is False
