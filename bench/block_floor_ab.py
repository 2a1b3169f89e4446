"""v2.25's ``block_floor`` again, with the window adapter: an explicit hole (a minimum, as
``<FILL>`` and HumanEval make) that inserts whole lines before code is not ended by a blank line,
and only by a line indented less than both its first line and the code after the hole
(Finisher.said_all otherwise ends a fill at a blank line after code or at a line indented less
than its first). Paired as bench/drop_behind_ab.py pairs (``off``: the shipped rule). A patch made
at run time: the engine is unchanged (BENCHMARKS.md v2.31).

    .venv/bin/python bench/block_floor_ab.py multi-line --limit 60 --subset-seed 983 --out results.json
"""

from __future__ import annotations

from drop_behind_ab import arguments, paired

from infill.bench.quality import load_tasks
from infill.engine import finish
from infill.engine.fill import Engine, EngineConfig


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip())


def block_floor(request, i: int, text: str) -> int | None:
    """Where the variant ends hole i's fill written up to ``text`` (which ends a line): the length to
    keep, or None where it goes on; None too for a hole the variant leaves to the shipped rule."""
    hole = request.holes[i]
    after = finish.text_after(request, i)
    head = request.text[request.text.rfind("\n", 0, hole.start) + 1 : hole.start]
    if not hole.min_tokens or head.strip() or not after.startswith("\n"):
        return None
    code_after = next((line for line in after[1:].split("\n") if line.strip()), None)
    lines = text.split("\n")[:-1]
    first = next((line for line in lines[:-1] if line.strip()), None)
    if code_after is None or first is None:
        return None
    last = lines[-1]
    if last.strip() and indent_of(last) < min(indent_of(first), indent_of(code_after)):
        return len(text) - len(last) - 1
    return -1  # goes on (the repeat rule still ends it where it writes the code after the hole)


def main() -> None:
    args = arguments(__doc__.split("\n")[0]).parse_args()
    tasks = load_tasks(args.benchmark, limit=args.limit, seed=args.subset_seed)
    engine = Engine.load(EngineConfig(threads=2))
    shipped = finish.Finisher.said_all

    def variant(self, r, request, i, text):
        said = shipped(self, r, request, i, text)
        if said is None:
            return None
        cut = finish.cut_repeats(text, request.text[request.text.rfind("\n", 0, request.holes[i].start) + 1 : request.holes[i].start],
                                 finish.text_after(request, i))
        if len(cut) < len(text):
            return said  # the repeat rule stands
        floor = block_floor(request, i, text)
        return said if floor is None else (None if floor < 0 else floor)

    def off():
        finish.Finisher.said_all = shipped

    def on():
        finish.Finisher.said_all = variant

    paired(args.benchmark, tasks, engine, {"off": off, "on": on}, args.out, dict(limit=args.limit, subset_seed=args.subset_seed))


if __name__ == "__main__":
    main()
