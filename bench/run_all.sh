#!/usr/bin/env bash
# Re-runs the benchmarks whose results BENCHMARKS.md summarises (CPU; about 75 minutes on 2 idle cores).
# Usage: bench/run_all.sh [extra model options, e.g. --model DIR --threads 2]
set -euo pipefail
cd "$(dirname "$0")/.."
INFILL=${INFILL:-.venv/bin/infill}
R=bench/results
bench/fetch_validity_sources.sh

"$INFILL" bench quality single-line --limit 300 --out $R/quality-single-line-300 "$@"
"$INFILL" bench quality single-line --limit 300 --unconstrained --out $R/quality-single-line-300-unconstrained "$@"
"$INFILL" bench quality multi-line --limit 100 --out $R/quality-multi-line-100 "$@"
"$INFILL" bench quality multi-line --limit 100 --unconstrained --out $R/quality-multi-line-100-unconstrained "$@"
"$INFILL" bench overhead single-line --limit 300 --out $R/overhead-single-line-300 "$@"
"$INFILL" bench overhead multi-line --limit 100 --out $R/overhead-multi-line-100 "$@"
"$INFILL" bench overhead single-line --limit 300 --batch-size 1 --out $R/overhead-single-line-300-b1 "$@"
"$INFILL" bench overhead multi-line --limit 100 --batch-size 1 --out $R/overhead-multi-line-100-b1 "$@"
"$INFILL" bench quality single-line --limit 300 --policy left-to-right --steps 32 --out $R/quality-single-line-300-ltr "$@"
"$INFILL" bench speed --sections grid,decoding,constrained --contexts 256,1024 --windows 16,32,64 --repeats 5 --warmup 1 --out $R/speed-cpu "$@"
"$INFILL" bench speed --sections constrained --contexts 1024 --windows 64 --repeats 30 --warmup 1 --out $R/speed-cpu-constrained "$@"
"$INFILL" bench lsp --out $R/lsp-cpu "$@"
"$INFILL" bench lsp --context-tokens 0 --out $R/lsp-cpu-whole-files "$@"
"$INFILL" bench lsp --context-tokens 0 --unconstrained --out $R/lsp-cpu-whole-files-unconstrained "$@"
"$INFILL" bench validity javascript go --holes 60 --max-tokens 32 --seed 0 --out $R/validity-cpu "$@"
# Where an editor's cursor often is: inside brackets it closed as they were typed, and in a string's text.
"$INFILL" bench validity javascript go --holes 100 --kinds inside --seed 0 --out $R/validity-inside "$@"
"$INFILL" bench validity javascript go --holes 100 --kinds string --seed 0 --out $R/validity-string "$@"
# Real Python files, for what the checks cost in them (the standard library is in the training corpus:
# its fills' quality says nothing; their validity and latency do).
STDLIB=$("${PYTHON:-.venv/bin/python}" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
"$INFILL" bench validity python --sources "$STDLIB" --holes 400 --max-tokens 32 --seed 1 --out $R/validity-python-stdlib "$@"
"$INFILL" bench validity python --sources "$STDLIB" --holes 200 --kinds inside --seed 1 --out $R/validity-python-inside "$@"
"$INFILL" bench validity python --sources "$STDLIB" --holes 200 --kinds string --seed 1 --out $R/validity-python-string "$@"
# The fresh-sample sweep (issue 25 step 8): every language of grammars/languages.toml, holes of every kind
# (block: 2-6 whole lines), seeds never tuned on (7, 11), sources from bench/fetch_validity_sources.sh
# (Python: PyPI packages outside the training corpus).
for seed in 7 11; do
    "$INFILL" bench validity python javascript typescript tsx go rust java c cpp --sources bench/sources --holes 40 \
        --kinds line,rest,inside,string,block --seed $seed --out $R/validity-fresh-s$seed-quiet "$@"
done
