"""Shared fixtures: a tiny trained tokenizer and a tiny random model saved as a model directory.

``tiny_model_dir`` is a complete HF-layout model directory (config.json, model.safetensors,
tokenizer.json) built once per session; ``tiny_engine`` is an Engine loaded from it on the CPU.
The model's weights are random (seeded), so its fills are garbage but deterministic.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

# A few hundred KB of real Python source from the standard library, in a fixed order.
_STDLIB_FILES = [
    "argparse.py", "dataclasses.py", "functools.py", "json/decoder.py", "json/encoder.py",
    "textwrap.py", "shlex.py", "heapq.py", "bisect.py", "csv.py", "difflib.py", "string.py",
    "fnmatch.py", "glob.py", "contextlib.py", "abc.py", "enum.py", "tempfile.py",
]


def stdlib_texts(limit_bytes: int = 400_000) -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    texts, total = [], 0
    for name in _STDLIB_FILES:
        path = root / name
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        texts.append(text)
        total += len(text)
        if total >= limit_bytes:
            break
    assert texts, f"no stdlib sources found under {root}"
    return texts


@pytest.fixture(scope="session")
def stdlib_sources():
    """stdlib_texts, for test modules (``from conftest import`` is ambiguous with tests/lsp/conftest.py)."""
    return stdlib_texts


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    import torch

    from infill.model.network import DiffusionLM, ModelConfig, save_model
    from infill.model.tokenizer import train_tokenizer

    directory = tmp_path_factory.mktemp("tiny-model")
    tok = train_tokenizer(stdlib_texts(), vocab_size=512)
    vocab = -(-tok.vocab_size // 64) * 64  # rounded up to a multiple of 64
    torch.manual_seed(0)
    model = DiffusionLM(ModelConfig(vocab_size=vocab, d_model=32, n_layers=2, n_heads=2, d_ff=64, max_context=256))
    save_model(model, directory, extra={"name": "tiny-test"})
    tok.save(directory / "tokenizer.json")
    return directory


@pytest.fixture(scope="session")
def tiny_engine(tiny_model_dir):
    from infill.engine.fill import Engine, EngineConfig

    return Engine.load(EngineConfig(model_dir=tiny_model_dir, device="cpu", precision="fp32"))


@pytest.fixture(scope="module")
def default_engine():
    """The bundled default model (a causal model, left to right), on one thread; one per test module."""
    from infill.engine.fill import Engine, EngineConfig

    return Engine.load(EngineConfig(device="cpu", threads=1))


class ListTokenizer:
    """A tokenizer stub for the syntax checks: token t is the string ``vocab[t]`` (ids 0, 1 and 2
    are pad, mask and end, with no text); ``encode`` knows only whole tokens."""

    def __init__(self, vocab: list[str]):
        self.vocab = vocab

    def token_bytes(self, t: int) -> bytes:
        return b"" if t < 3 else self.vocab[t].encode()

    def encode(self, text: str) -> list[int]:
        return [self.vocab.index(text)]


@pytest.fixture
def list_tokenizer():
    """``ListTokenizer``, for tests that steer with a handful of tokens of their own."""
    return ListTokenizer


@pytest.fixture
def one_torch_thread():
    """One torch intra-op thread for a test: a tiny model's steps are microseconds of work, and on a
    loaded 2-core machine two OpenMP threads spin against each other (tens of times slower measured)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
