"""Load a model directory as whatever model its config.json says it is, behind the seam.

A loader is registered under a key its checkpoints' config.json names:

* ours: ``"architecture": "infill-segment-window-v1"``;
* a Hugging Face checkpoint: one of its ``"architectures"`` (class names, e.g. ``DreamModel``),
  else its ``"model_type"`` (e.g. ``llada``).

The keys are tried in that order, the first registered one wins. A loader gets the directory, the
parsed config.json, the device and the dtype, and returns the model (infill/model/seam.py's
DiffusionModel) and its tokenizer, or raises ModelLoadError with one line saying what is wrong.
Loaders of heavy libraries (transformers) import them inside the loader, so registering costs
nothing at start-up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch

from infill.errors import ModelLoadError
from infill.model import network
from infill.model.seam import DiffusionModel, Tokenizer

Loader = Callable[[Path, dict, torch.device, torch.dtype], tuple[DiffusionModel, Tokenizer]]

_LOADERS: dict[str, Loader] = {}


def register(key: str, loader: Loader) -> None:
    """Load checkpoints whose config.json names ``key`` (see the module's docstring) with ``loader``."""
    _LOADERS[key] = loader


def architecture_keys(data: dict) -> list[str]:
    """The keys a config.json names, in the order they are looked up."""
    keys = [data.get("architecture")]
    architectures = data.get("architectures")
    if isinstance(architectures, list):
        keys.extend(architectures)
    keys.append(data.get("model_type"))
    return [k for k in keys if isinstance(k, str) and k]


def loader_for(data: dict, path: Path) -> Loader:
    keys = architecture_keys(data)
    for key in keys:
        if key in _LOADERS:
            return _LOADERS[key]
    named = ", ".join(repr(k) for k in keys) or "none"
    raise ModelLoadError(f"{path}: unknown architecture ({named}; known: {', '.join(sorted(_LOADERS))})")


def load(directory: Path | str, device: torch.device | str = "cpu",
         dtype: torch.dtype = torch.float32) -> tuple[DiffusionModel, Tokenizer]:
    """The model in ``directory`` and its tokenizer, on ``device`` in ``dtype``; its ``name`` is
    config.json's ``name``, else the directory's name."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ModelLoadError(f"model directory {directory} does not exist")
    data = network.read_config_json(directory)
    model, tokenizer = loader_for(data, directory / "config.json")(directory, data, torch.device(device), dtype)
    model.name = data.get("name") or directory.name
    langs = data.get("languages")
    model.languages = tuple(str(x) for x in langs) if isinstance(langs, list) and langs else None
    return model, tokenizer


def _load_segment_window(directory: Path, data: dict, device: torch.device, dtype: torch.dtype):
    """Ours (infill/model/network.py): config.json, tokenizer.json, model.safetensors."""
    from infill.model.tokenizer import Tokenizer as OurTokenizer

    cfg = network.parse_config(data, directory / "config.json")
    tokenizer = OurTokenizer.from_file(directory / "tokenizer.json")
    model = network.load_weights(directory, cfg, device=str(device), dtype=dtype)
    return model, tokenizer


register(network.ARCHITECTURE, _load_segment_window)


def _register_hf() -> None:
    """The open diffusion LMs in transformers' classes (infill/model/hf/loader.py; transformers
    loads only when one of them does)."""
    from infill.model.hf.loader import register_all

    register_all(register)


_register_hf()
