"""The keystroke that moves a long prefix's sticky start, with and without the context encoded
ahead in the worker's idle time (``Engine.encode_ahead``), in one process.

A typist retypes a real file from a random line on, a character a keystroke, the rest of the
line being typed removed (as ``bench lsp`` types), with the language server's options at a cursor
(one candidate, a 32-token window, the model's score floor). For each of ``--jumps`` spots the
script finds the keystroke whose prefix starts later than the one before (``Engine.prepare``: the
whole context to encode again) and types the ``--before`` keystrokes before it, it, and
``--after`` more, twice, on two engines over the default model from an empty context cache
(which goes first alternates): one plain, one that after every keystroke's fill runs
``encode_ahead`` (as the language server's worker does once idle: here, a typist who pauses after
each keystroke long enough for it). The first keystroke at a spot (a cold context) is not counted.

    .venv/bin/python bench/encode_ahead_ab.py --file /usr/lib/python3.11/inspect.py --seed 431
"""

from __future__ import annotations

import argparse
import bisect
import random
import statistics
import time

from infill.engine.fill import Engine, EngineConfig
from infill.model.declared import declared_min_score
from infill.protocol import FillRequest, Hole, SamplingOptions


def keystroke(text: str, cur: int, floor: float | None) -> FillRequest:
    """The request at a cursor ``cur`` of ``text`` retyped up to it: the rest of its line removed."""
    end = text.find("\n", cur)
    end = len(text) if end < 0 else end
    return FillRequest(text=text[:cur] + text[end:], holes=[Hole(cur, cur, 32)], language="python",
                       options=SamplingOptions(candidates=1, min_score=floor))


def jump_at(engine: Engine, text: str, cur: int, floor: float | None, limit: int = 4000) -> int | None:
    """The first cursor after ``cur`` whose prefix starts later than at ``cur`` (found by bisection:
    the start only moves on as the prefix grows); None within ``limit`` characters."""
    def start(c: int) -> list[int]:
        return engine.prepare(keystroke(text, c, floor)).segments[0][:8]

    first, cursors = start(cur), range(cur, min(cur + limit, len(text) - 1) + 1)
    if start(cursors[-1]) == first:
        return None
    return cursors[bisect.bisect_left(cursors, True, key=lambda c: start(c) != first)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--file", default="/usr/lib/python3.11/inspect.py")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--jumps", type=int, default=6)
    parser.add_argument("--before", type=int, default=24, help="keystrokes typed before the one that moves the start")
    parser.add_argument("--after", type=int, default=4)
    args = parser.parse_args()
    text = open(args.file).read()
    plain, ahead = Engine.load(EngineConfig(threads=2)), Engine.load(EngineConfig(threads=2))
    floor = declared_min_score(plain.config.model_dir)
    rng = random.Random(args.seed)
    rows = []
    while len(rows) < args.jumps:
        cur = rng.randrange(len(text) // 4, len(text) * 3 // 4)  # long prefixes
        jump = jump_at(plain, text, cur, floor)
        if jump is None or jump - args.before < cur:
            continue
        cursors = range(jump - args.before, jump + args.after + 1)
        got: dict[str, list] = {}
        for name in (("plain", "ahead") if len(rows) % 2 == 0 else ("ahead", "plain")):
            engine = plain if name == "plain" else ahead
            engine.forget()
            times, fills, spent, kept = [], [], 0.0, 0
            for c in cursors:
                request = keystroke(text, c, floor)
                t0 = time.perf_counter()
                fills.append(engine.fill(request).fills[0].text)
                times.append((time.perf_counter() - t0) * 1000)
                if name == "ahead":
                    t0 = time.perf_counter()
                    kept = max(kept, engine.encode_ahead(request))
                    spent += (time.perf_counter() - t0) * 1000
            got[name] = [times, fills, spent, kept]
        k = args.before  # the jump's index
        p, a = got["plain"], got["ahead"]
        rows.append((p[0][k], a[0][k], p[0][1:k] + p[0][k + 1 :], a[0][1:k] + a[0][k + 1 :], a[2], a[3], p[1] == a[1]))
        line = text.count("\n", 0, jump) + 1
        print(f"line {line}: the jump keystroke {p[0][k]:.0f} -> {a[0][k]:.0f} ms; the others' median "
              f"{statistics.median(rows[-1][2]):.0f} -> {statistics.median(rows[-1][3]):.0f} ms; encoding ahead took "
              f"{a[2]:.0f} ms of idle, {a[3]} tokens kept; fills the same: {rows[-1][6]}", flush=True)
    plain_jump, ahead_jump = [r[0] for r in rows], [r[1] for r in rows]
    print(f"{len(rows)} jumps in {args.file} (seed {args.seed}): the jump keystroke median {statistics.median(plain_jump):.0f} -> "
          f"{statistics.median(ahead_jump):.0f} ms, max {max(plain_jump):.0f} -> {max(ahead_jump):.0f} ms; the other keystrokes' "
          f"median {statistics.median(x for r in rows for x in r[2]):.0f} -> {statistics.median(x for r in rows for x in r[3]):.0f} ms; "
          f"idle spent encoding ahead, median {statistics.median(r[4] for r in rows):.0f} ms a jump; "
          f"every fill the same: {all(r[6] for r in rows)}")


if __name__ == "__main__":
    main()
