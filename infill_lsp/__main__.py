"""``python -m infill_lsp``: the language server without infill's CLI (same flags as ``infill lsp``)."""

import argparse
import sys
from pathlib import Path

from .cli import add_arguments, main


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m infill_lsp", description="infill's language server")
    p.add_argument("--model", metavar="DIR", type=Path, default=None, help="model directory (default: the bundled model)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda[:N]")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log more (-v info, -vv debug)")
    add_arguments(p)
    return p


if __name__ == "__main__":
    sys.exit(main(_parser().parse_args()))
