"""Fixtures for the open diffusion LM tests: tiny random checkpoints of each family in its own
file layout (hf_checkpoints.py), built once per session, and models loaded from them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hf_checkpoints as C  # noqa: E402

BUILDERS = {
    "dream": lambda d: C.dream(d, variant="dream", tokenizer_files="vocab-merges"),
    "dream-coder": lambda d: C.dream(d, variant="dream-coder"),
    "dreamon": lambda d: C.dream(d, variant="dreamon", seed=3),
    "diffucoder": lambda d: C.dream(d, variant="diffucoder", seed=4),
    "open-dcoder": lambda d: C.open_dcoder(d),
    "llada": lambda d: C.llada(d),
    "dream-small": lambda d: C.dream(d, variant="dream-coder", small_vocab=True, seed=5),
    "causal-llama": lambda d: C.causal_llama(d),
    "causal-llama-int8": lambda d: C.causal_llama(d, variant="int8"),
    "causal-qwen2": lambda d: C.open_dcoder(d, mask=False),
}


@pytest.fixture(scope="session")
def hf_dirs(tmp_path_factory):
    """family -> checkpoint directory, built on first use."""
    root = tmp_path_factory.mktemp("hf-checkpoints")
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            built[name] = BUILDERS[name](root / name)
        return built[name]

    return get


@pytest.fixture(scope="session")
def hf_models(hf_dirs):
    """family -> (model, tokenizer) loaded in fp32 on the CPU, once."""
    import torch

    from infill.model import registry

    loaded = {}

    def get(name: str):
        if name not in loaded:
            loaded[name] = registry.load(hf_dirs(name), "cpu", torch.float32)
        return loaded[name]

    return get
