"""Pure helpers of the cursor items (lsp/server.py): the languages a server advertises, the
completion snippet, the trailing whitespace-only line."""

from __future__ import annotations

import json

from infill.model.declared import bundled_model_dir, declared_languages
from infill.lsp.server import (completion_snippet, languages_payload,
                               trim_trailing_blank_line)


def test_the_bundled_model_says_its_languages(tmp_path):
    from infill.syntax.languages import specs

    assert set(declared_languages(bundled_model_dir())) == set(specs())  # every language of grammars/
    (tmp_path / "config.json").write_text(json.dumps({"architecture": "x"}))
    assert declared_languages(tmp_path) is None
    assert declared_languages(tmp_path / "missing") is None


def test_languages_payload_lists_lsp_ids():
    assert languages_payload(("python",)) == {"languages": ["python"], "languageIds": ["python"]}
    every = languages_payload(None)
    assert "python" in every["languages"] and len(every["languages"]) > 1
    assert "typescriptreact" in every["languageIds"]


def test_completion_snippet_escapes_and_drops_the_base_indent():
    assert completion_snippet("return sku, sku, 0.0,", "    ") == "return sku, sku, 0.0,"
    assert completion_snippet("f'${x}'", "") == "f'\\${x\\}'"
    assert completion_snippet("if a:\n        b\n    c", "    ") == "if a:\n    b\nc"
    assert completion_snippet("if a:\n  b", "    ") is None  # a line left of the base indent: plain text
    assert completion_snippet("a\n\n    b", "    ") is None  # an empty line would get the indent


def test_a_last_whitespace_only_line_is_dropped_at_the_end_of_a_line():
    assert trim_trailing_blank_line("if x:\n        y\n    ", "") == "if x:\n        y"
    assert trim_trailing_blank_line("if x:\n        y\n    ", ")") == "if x:\n        y\n    "
    assert trim_trailing_blank_line("return x", "") == "return x"
