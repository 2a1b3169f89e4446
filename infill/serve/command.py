"""The ``infill serve`` command: one engine in this process (infill/serve/server.py), or with
``--ray`` engine replicas on Ray Serve behind the same websocket front (infill/serve/ray_front.py).

It only wires the two: their options, the checks that concern both (a non-loopback address
needs a token; the Ray options need ``--ray``, and ``--ray`` needs the extra infill[ray]), and
which ``main`` runs. Neither module imports Ray at import time, so ``infill serve`` works
without the extra.
"""

from __future__ import annotations

import argparse
import sys

from infill.serve import ray_front, server


def add_arguments(parser: argparse.ArgumentParser) -> None:
    server.add_arguments(parser)
    ray_front.add_arguments(parser)


def main(args: argparse.Namespace) -> int:
    problem = ray_front.check_arguments(args)
    if problem:
        print(f"infill serve: error: {problem}", file=sys.stderr)
        return 2
    if not args.ray:
        return server.main(args)
    from infill.lsp.transport import is_loopback

    if not is_loopback(args.host) and not args.token:  # the same rule as server.main's
        print(f"infill serve: error: binding {args.host} (not loopback) needs --token", file=sys.stderr)
        return 2
    return ray_front.main(args)
