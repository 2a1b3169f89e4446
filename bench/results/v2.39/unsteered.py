"""Which recorded validity holes of a language does the engine fill unsteered (the hole judged
inside a string or comment: no steering lexer)? Each record's hole as the engine moves it
(line_start_holes: after its line's indentation, to the line's start).

Usage: python bench/results/v2.39/unsteered.py LANGUAGE DIR...
"""

import sys

from infill.bench.validity import recorded_cuts
from infill.engine.fill import line_start_holes
from infill.protocol import SamplingOptions
from infill.syntax.constraint import RequestCheck

language, dirs = sys.argv[1], sys.argv[2:]
n = unsteered = 0
for d, r, cut in recorded_cuts(dirs):
    if r["language"] != language:
        continue
    n += 1
    request, _ = line_start_holes(cut.request(language, 32, SamplingOptions(constrained=True)))
    if RequestCheck(request).lexers[0] is None:
        unsteered += 1
        print(d.split("/")[-1], r["kind"], r["path"], repr(r["reference"][:50]), "parses" if r.get("valid") else "fails")
print(f"{language}: {unsteered} of {n} records unsteered")
