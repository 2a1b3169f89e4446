"""Weights as safetensors files of bounded size: written in shards with Hugging Face's index, read
back from either layout.

A directory holds ``model.safetensors`` or ``model-0000k-of-0000N.safetensors`` files named by
``model.safetensors.index.json``; :func:`write` cuts the tensors, in order, into files of at most
a given size (a tensor larger than that gets a file of its own), and :func:`read` loads every
tensor of either layout. Nothing here knows a network: names and tensors only, no pickles.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from infill.errors import ModelLoadError

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"


def groups(state: dict[str, torch.Tensor], limit: int) -> list[dict[str, torch.Tensor]]:
    """The tensors in order, cut into groups of at most ``limit`` bytes each."""
    out: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, t in state.items():
        n = t.numel() * t.element_size()
        if out[-1] and size + n > limit:
            out.append({})
            size = 0
        out[-1][name] = t
        size += n
    return out


def write(state: dict[str, torch.Tensor], directory: Path, limit: int) -> list[Path]:
    """``state`` as shard files of at most ``limit`` bytes of tensors each and their index, in
    ``directory`` (the safetensors header adds a few kilobytes); the files written."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    parts = groups({k: v.detach().to("cpu").contiguous() for k, v in state.items()}, limit)
    weight_map, files = {}, []
    for k, group in enumerate(parts, 1):
        file = f"model-{k:05d}-of-{len(parts):05d}.safetensors"
        save_file(group, str(directory / file), metadata={"format": "pt"})
        weight_map.update({n: file for n in group})
        files.append(directory / file)
    total = sum(t.numel() * t.element_size() for t in state.values())
    (directory / INDEX).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1) + "\n")
    return files


def files(directory: Path) -> dict[str, Path]:
    """Tensor name -> file, from the index (every shard it names must exist) or model.safetensors."""
    index = directory / INDEX
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ModelLoadError(f"{index}: unreadable index ({e})") from None
        shards = sorted(set(weight_map.values()))
        missing = [s for s in shards if not (directory / s).is_file()]
        if missing:
            raise ModelLoadError(f"{directory}: missing weight shard {missing[0]} (of {len(shards)} named in {INDEX})")
        return {name: directory / shard for name, shard in weight_map.items()}
    single = directory / SINGLE
    if single.is_file():
        from safetensors import safe_open

        try:
            with safe_open(str(single), "pt") as f:
                return {name: single for name in f.keys()}
        except Exception as e:
            raise ModelLoadError(f"{single}: corrupt weights ({e})") from None
    if any(directory.glob("*.bin")) or any(directory.glob("*.pt")):
        raise ModelLoadError(f"{directory}: only pickled weights (.bin/.pt); convert them to safetensors first")
    raise ModelLoadError(f"{directory}: no {SINGLE} or {INDEX}")


def read(directory: Path) -> dict[str, torch.Tensor]:
    """Every tensor of ``directory`` (either layout), on the CPU."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    out: dict[str, torch.Tensor] = {}
    for file in dict.fromkeys(files(directory).values()):
        try:
            out.update(load_file(str(file)))
        except (SafetensorError, OSError, ValueError) as e:
            raise ModelLoadError(f"{file}: corrupt weights ({e})") from None
    return out
