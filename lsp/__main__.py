"""``python -m infill.lsp``: the language server without infill's CLI (same flags as ``infill lsp``)."""

import argparse
import sys

from infill.args import add_model_options

from infill.lsp.cli import add_arguments, main


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m infill.lsp", description="infill's language server")
    add_model_options(p)
    p.add_argument("-v", "--verbose", action="count", default=0, help="log more (-v info, -vv debug)")
    add_arguments(p)
    return p


if __name__ == "__main__":
    sys.exit(main(_parser().parse_args()))
