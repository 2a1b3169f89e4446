"""`python bench/results/v2.40/quietab_lang.py SEED LANGUAGE...`: quietab.py over one real file of each
language's own suffixes in bench/sources, chosen with the seed."""
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from quietab import engine_and_tokenizer, replay, total  # noqa: E402

from infill.bench import keystrokes as K  # noqa: E402

SUFFIXES = dict(python=(".py",), javascript=(".js",), typescript=(".ts",), tsx=(".tsx",), go=(".go",), rust=(".rs",),
                java=(".java",), c=(".c", ".h"), cpp=(".cc", ".cpp", ".h", ".hpp", ".ipp"))

if __name__ == "__main__":
    eng, tok = engine_and_tokenizer()
    seed, runs = int(sys.argv[1]), []
    for lang in sys.argv[2:]:
        rng = random.Random(f"{seed}-{lang}")
        files = sorted(p for p in Path("bench/sources", lang).rglob("*") if p.is_file() and p.suffix in SUFFIXES[lang])
        doc = None
        while doc is None:
            f = rng.choice(files)
            text = f.read_text(encoding="utf-8", errors="replace")
            if 2000 < len(text) < 200_000:
                doc = K.build_document(f"file:///q/{f.name}", f.name, text, tok, keystrokes=63, context_tokens=0, rng=rng)
        runs.append(replay(eng, doc, lang, f"{lang}-{f.name}", lang=lang, file=str(f.relative_to("bench/sources"))))
    total(runs)
