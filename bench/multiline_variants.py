"""`infill ...` run with one of two decoding variants for multi-line holes, to compare against the
same command without it (BENCHMARKS.md v2.30; both were measured and not adopted):

- ``loose``: a hole before text indented deeper than it allows is filled in its first round with
  its shape as it is (statements, then the header whose ':' opens that text), not with the
  header's head alone (infill/lang/python/shape.py, ``first_round_shape``);
- ``eos``: where no code follows the hole (the end of the file), the candidates are ranked with
  the model's end-of-text token after them, so that a fill that stops early pays for ending
  there (infill/engine/fill.py, ``Engine.rank``).

    .venv/bin/python bench/multiline_variants.py eos bench quality multi-line --limit 80 --subset-seed 907 --threads 2 --out DIR -q
"""

from __future__ import annotations

import sys

from infill.cli import main
from infill.engine import fill
from infill.lang.python import shape


def loose() -> None:
    shape.first_round_shape = lambda s: s  # the hooks look it up on the module at each request


def eos() -> None:
    rank = fill.Engine.rank

    def at_the_end(self, p, texts: list[str]) -> int:
        """Engine.rank, its scored sequences ending with the end-of-text token where no code follows the hole."""
        if p.request.text[p.request.holes[0].end :].strip():
            return rank(self, p, texts)
        score = self.model.continuation_logprob
        self.model.continuation_logprob = lambda context, seqs: score(context, [s + [self.tokenizer.eos_id] for s in seqs])
        try:
            return rank(self, p, texts)
        finally:
            del self.model.continuation_logprob  # the instance's wrapper: the class's method again

    fill.Engine.rank = at_the_end


VARIANTS = {"loose": loose, "eos": eos}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in VARIANTS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(VARIANTS)}}} INFILL-ARGS...")
    VARIANTS[sys.argv[1]]()
    sys.exit(main(sys.argv[2:]))
