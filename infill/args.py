"""The command line's shared options: argument types that fail with one clear line, the model
options (``--model``, ``--device``, ``--threads``, ``--precision``), the sampling options and what
they become (SamplingOptions, a loaded Engine).

Every command that loads a model or samples (fill, refactor, lsp, the benchmarks) takes its flags
from here, so they read the same everywhere. It imports nothing heavy: torch and the engine load
only in :func:`load_engine`. It knows no subcommand (infill.cli wires those).
"""

from __future__ import annotations

import argparse
import typing
from pathlib import Path

from infill.errors import InputError
from infill.protocol import Policy
from infill.text.holes import parse_position

PROG = "infill"


# ----------------------------------------------------------------------------------------------
# Argument types (each raises argparse.ArgumentTypeError: one clear line, exit 2).


def int_in(lo: int, hi: int | None = None):
    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{s!r} is not an integer") from None
        if v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"{v} is not in {lo}..{hi if hi is not None else ''}")
        return v

    return parse


def float_in(lo: float, hi: float | None = None, lo_open: bool = False):
    def parse(s: str) -> float:
        try:
            v = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{s!r} is not a number") from None
        if v != v or v < lo or (lo_open and v == lo) or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"{v} is out of range")
        return v

    return parse


def cursor_position(s: str) -> tuple[int, int]:
    try:
        return parse_position(s)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{e} (expected LINE:COL, 1-based)") from None


def device_name(s: str) -> str:
    if s in ("auto", "cpu", "cuda") or (s.startswith("cuda:") and s[5:].isdigit()):
        return s
    raise argparse.ArgumentTypeError(f"{s!r}: use auto, cpu, cuda or cuda:N")


CONTEXT_CACHE_DEFAULTS = "32768, infill serve 131072"  # EngineConfig.context_cache_tokens; infill/serve/server.py


def add_model_options(p: argparse.ArgumentParser) -> None:
    """--model, --device, --threads, --precision, --cache-mode (shared by every command that loads a model)."""
    p.add_argument("--model", metavar="DIR", type=Path, default=None,
                   help="model directory (config.json, model.safetensors, tokenizer.json); default: the bundled model")
    p.add_argument("--device", type=device_name, default="auto", help="auto | cpu | cuda[:N] (default: auto)")
    p.add_argument("--threads", type=int_in(1), default=None, help="torch CPU threads (default: torch's)")
    p.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto",
                   help="weights and activations: bf16 on GPUs and CPUs with native bf16 (AMX, AVX512-BF16), "
                        "else fp32 (default: auto)")
    p.add_argument("--cache-mode", choices=("exact", "approximate"), default="exact",
                   help="context reuse for open diffusion models whose context attends to the fill (Dream, LLaDA, ...): "
                        "exact recomputes every step; approximate reuses the context's keys and values across steps "
                        "(faster, close). Our own model is exact either way (default: exact)")
    p.add_argument("--context-cache", metavar="TOKENS", type=int_in(0), default=None,
                   help="context tokens whose encoding is kept for reuse across fills, all documents together "
                        "(about 23 MB per 1k tokens for the default model; default: %s)" % CONTEXT_CACHE_DEFAULTS)
    p.add_argument("--suffix-lines", type=int_in(0), default=None,
                   help="a causal model reads this many lines after the hole's line before the text before it (default: as many as "
                        "the model's window adapter was trained to read; 0 without one)")
    p.add_argument("--lookahead", type=int_in(0), default=None,
                   help="a causal model's speculative steps: tokens guessed ahead by prompt lookup and checked in one "
                        "model call (the same fill, fewer calls; 0: one token a call; default: 3, with the token before them one "
                        "block of the CPU's 4-row kernels)")


def engine_settings(args: argparse.Namespace) -> dict:
    """The EngineConfig fields the model options set (absent options keep EngineConfig's defaults)."""
    out = {"threads": getattr(args, "threads", None), "precision": getattr(args, "precision", "auto"),
           "cache_mode": getattr(args, "cache_mode", "exact")}
    if getattr(args, "lookahead", None) is not None:
        out["lookahead"] = args.lookahead
    if getattr(args, "context_cache", None) is not None:
        out["context_cache_tokens"] = args.context_cache
    if getattr(args, "suffix_lines", None) is not None:
        out["suffix_lines"] = args.suffix_lines
    return out


def add_sampling_arguments(g) -> None:
    """The sampling flags shared by fill and refactor (they map onto SamplingOptions)."""
    g.add_argument("--steps", type=int_in(1), default=None, help="denoising steps (default: the engine's schedule)")
    g.add_argument("--threshold", type=float_in(0.0, 1.0), default=None,
                   help="commit every token above this confidence each step (at least one)")
    g.add_argument("--policy", choices=list(typing.get_args(Policy)), default="confidence",
                   help="which masked tokens to commit first (default: confidence)")
    g.add_argument("--temperature", type=float_in(0.0), default=0.0, help="0 = greedy (default)")
    g.add_argument("--top-p", type=float_in(0.0, 1.0, lo_open=True), default=1.0, help="nucleus sampling (default: 1.0)")
    g.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    g.add_argument("--candidates", type=int_in(0), default=0,
                   help="candidates per request (window lengths x seeds); 0 = the engine's default")
    g.add_argument("--no-constrain", dest="constrained", action="store_false",
                   help="no syntax-checked selection of candidates")


def sampling_options(args: argparse.Namespace):
    from infill.protocol import SamplingOptions

    return SamplingOptions(
        steps=args.steps,
        threshold=args.threshold,
        policy=args.policy,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
        candidates=args.candidates,
        constrained=args.constrained,
    )


def add_engine_option(p) -> None:
    """--engine ws://HOST:PORT and --engine-token: a running ``infill serve`` instead of a local model."""
    p.add_argument("--engine", metavar="ws://HOST:PORT", default=None,
                   help="use a running `infill serve` instead of loading a model (model options are the server's)")
    p.add_argument("--engine-token", metavar="TOKEN", default=None, help="the token of the --engine server, if it has one")


def load_engine(args: argparse.Namespace, priority: str = "interactive"):
    """The engine the model options describe (imports torch), or with ``--engine`` a client of
    that server (infill/serve/client.py: the same fill_batch; its requests have ``priority``)."""
    if getattr(args, "engine", None):
        from infill.serve.client import EngineClient

        try:
            client = EngineClient(args.engine, token=getattr(args, "engine_token", None), priority=priority)
        except ValueError as e:
            raise InputError(f"--engine {e}") from None
        if not client.connected.is_set():
            client.close()
            raise InputError(f"--engine {args.engine}: the engine server is unreachable")
        return client
    from infill.engine.fill import DEFAULT_MODEL_DIR, Engine, EngineConfig

    model_dir = args.model if args.model is not None else DEFAULT_MODEL_DIR
    if args.model is not None and not Path(model_dir).exists():
        raise InputError(f"--model {model_dir}: no such directory")
    if not Path(model_dir).is_dir():
        raise InputError(f"model directory {model_dir}: not a directory")
    return Engine.load(EngineConfig(model_dir=Path(model_dir), device=args.device, **engine_settings(args)))
