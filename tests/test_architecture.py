"""The layers of docs/architecture.md, read off the import graph (every import, module-level or
inside a function, of infill/ and lsp/): no cycles, and no edge that goes the wrong way."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"infill": ROOT / "infill", "infill.lsp": ROOT / "lsp", "infill.grammars": ROOT / "grammars"}


def modules() -> dict[str, Path]:
    out = {}
    for prefix, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([prefix, *parts])] = path
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            edges[name] |= {t for t in targets if t in mods and t != name}
    return edges


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_no_import_cycles():
    edges = graph()
    # Package __init__ modules that only document their package are leaves; a cycle through
    # them would still show here, since their edges are kept.
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(edges[m]):
            if state.get(n) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)


def test_layers_point_one_way():
    """Lower layers never import higher ones."""
    never = {  # importer package -> packages it must not import
        "infill.text": ["infill.model", "infill.decode", "infill.syntax", "infill.lang", "infill.engine", "infill.lsp", "infill.cli"],
        "infill.model": ["infill.decode", "infill.syntax", "infill.lang", "infill.engine", "infill.train", "infill.lsp", "infill.cli"],
        "infill.decode": ["infill.syntax", "infill.lang", "infill.engine", "infill.train", "infill.lsp", "infill.cli"],
        "infill.syntax": ["infill.model", "infill.decode", "infill.engine", "infill.lsp", "infill.cli"],
        "infill.train": ["infill.engine", "infill.lsp", "infill.cli", "infill.syntax"],
        "infill.engine": ["infill.lsp", "infill.cli", "infill.train", "infill.bench", "infill.refactor"],
        "infill.bench": ["infill.lsp"],
        "infill.refactor": ["infill.cli", "infill.lsp"],
        "infill.lsp": ["infill.cli", "infill.bench", "infill.train"],
    }
    allowed = {("infill.train", "infill.syntax.languages")}  # the one language table (a window adapter's examples
    # are laid out under each language's comment, as the engine lays out its snippets)
    wrong = [(m, t) for m, ts in graph().items() for t in ts
             for importer, banned in never.items() if _under(m, importer) and any(_under(t, b) for b in banned)
             and not any(_under(m, a) and t == b for a, b in allowed)]
    assert not wrong, wrong
