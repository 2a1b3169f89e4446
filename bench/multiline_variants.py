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
    def rank(self, p, texts: list[str]) -> int:
        hole = p.request.holes[0]
        after = p.shape.opener + fill.suffix_head(p.request.text[hole.end :], self.config.rerank_lines)
        head = p.heals[0].decode("utf-8", "replace")
        seqs = self.tokenizer.encode_batch([head + t + after for t in texts])
        if not p.request.text[hole.end :].strip():
            seqs = [s + [self.tokenizer.eos_id] for s in seqs]
        scores = self.model.continuation_logprob(p.segments[0], seqs)
        return max(range(len(texts)), key=scores.__getitem__)

    fill.Engine.rank = rank


VARIANTS = {"loose": loose, "eos": eos}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in VARIANTS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(VARIANTS)}}} INFILL-ARGS...")
    VARIANTS[sys.argv[1]]()
    sys.exit(main(sys.argv[2:]))
