"""A model too large for one GPU, spread over several: the plan (a pure decision) and its execution.

:func:`plan` decides. Given the model's skeleton (built on the meta device), the weights' dtype
and each GPU's free memory ({index: bytes}, as ``torch.cuda.mem_get_info`` gives it), it returns
None where the weights fit the device asked for (everything goes there), else module name ->
device index, made by accelerate's ``infer_auto_device_map`` (the optional extra
``infill[multi-gpu]``) with those budgets and the model's ``_no_split_modules``. Where the GPUs
together cannot hold the weights it raises a ModelLoadError that says how much is needed and how
much is free: nothing is ever offloaded to the CPU or the disk.

Headroom: a device's budget for weights is ``1 - HEADROOM`` of its free memory; the rest is kept
for activations (a step's layout, the logits) and our caches (the keys and values kept across steps
and fills, each layer's on that layer's device). accelerate also keeps room for the largest layer
on the first device (for an offloaded layer it would load there; nothing is offloaded here): spare
room beside the logits, which are made there.

A plan's invariants (:func:`check`, enforced on every plan made here):

* every parameter and buffer has a device (:func:`device_of`); a tied tensor (a head tied to the
  embedding) has one;
* a decoder layer is never split; the layers run in order over the devices, each device holding one
  contiguous run of them.

Where things go, and why the model code is right with it: the head is planned first, so it lands on
the first device with the embedding (the tied head is the embedding; a first device too small for
both would put the embedding on the next, and the model would bring the logits back: right, but a
copy of the widest tensor of a step), and the rotary embedding is put there too: the inputs, masks
and positions are made on the embedding's device (``HFDiffusionModel.device``), and the logits are
used there.
:func:`dispatch` gives each planned module accelerate's hook, which moves the module's tensor
inputs (hidden states, mask, positions, the rotary cos/sin) to its device before it runs; outputs
stay where they are made. So the backbone's last states come out on the last device (the model
brings them back to the embedding's, ``HFDiffusionModel._run``), and a layer's keys and values are
made on that layer's device, where the model's caches keep them (the cache objects themselves pass
the hooks untouched). The price of the hooks: each layer on another device than the embedding's
copies the step's mask and cos/sin to itself. int8 weights are dequantized on a GPU
(``int8.int8_runs_on``), so a plan never holds an int8 head.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping

import torch
from torch import nn

from infill.errors import ModelLoadError

log = logging.getLogger(__name__)

HEADROOM = 0.2  # of each device's free memory, kept for activations and caches (the rest is for weights)
EMBEDDING, ROTARY = "model.embed_tokens", "model.rotary_emb"
LAYERS = "model.layers."


def weights_bytes(model: nn.Module, dtype: torch.dtype) -> int:
    """Bytes of the model's parameters and buffers in ``dtype`` (floating ones; a tied tensor once)."""
    tensors = [*model.parameters(), *model.buffers()]
    return sum(t.numel() * (dtype.itemsize if t.is_floating_point() else t.element_size()) for t in tensors)


def budget(free: int, headroom: float = HEADROOM) -> int:
    """The bytes of weights a device with ``free`` bytes free takes."""
    return int(free * (1 - headroom))


def device_of(plan: Mapping[str, object], name: str):
    """The device of a module, parameter or buffer ``name`` under ``plan``: its nearest planned
    ancestor's (or its own) entry. KeyError where nothing in the plan covers it."""
    at = name
    while True:
        if at in plan:
            return plan[at]
        if not at:
            raise KeyError(name)
        at = at.rpartition(".")[0]


def check(plan: Mapping[str, object], model: nn.Module) -> None:
    """Raise ValueError where ``plan`` breaks an invariant (see the module's docstring)."""
    where: dict[int, set] = {}
    for name, t in [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]:
        try:
            where.setdefault(id(t), set()).add(device_of(plan, name))
        except KeyError:
            raise ValueError(f"no device for {name}") from None
        if len(where[id(t)]) > 1:
            raise ValueError(f"{name} is one tensor on several devices {sorted(map(str, where[id(t)]))}")
    inside = [k for k in plan if k.startswith(LAYERS) and k.count(".") > 2]
    if inside:
        raise ValueError(f"decoder layer split: {inside[0]}")
    runs = []
    for i in range(len(model.model.layers)):
        d = device_of(plan, f"{LAYERS}{i}")
        if not runs or runs[-1] != d:
            if d in runs:
                raise ValueError(f"layer {i} goes back to {d}: a device's layers are not contiguous")
            runs.append(d)


def plan(skeleton: nn.Module, dtype: torch.dtype, free: Mapping[int, int], first: int | None = None,
         headroom: float = HEADROOM) -> dict[str, int] | None:
    """None where the weights fit device ``first`` (default: the lowest index in ``free``), else
    module name -> device index over the devices of ``free``: ``first`` first, then the others in
    index order. A ModelLoadError where they do not fit them all. Needs accelerate only to split."""
    first = min(free) if first is None else first
    need = weights_bytes(skeleton, dtype)
    if need <= budget(free[first], headroom):
        return None
    order = [first, *sorted(d for d in free if d != first)]
    budgets = {k: budget(free[d], headroom) for k, d in enumerate(order)}  # accelerate fills 0, 1, ... in turn
    import accelerate

    head_first = nn.Module()  # the same modules under the same names, the head planned first
    head_first.lm_head, head_first.model = skeleton.lm_head, skeleton.model
    made = accelerate.infer_auto_device_map(head_first, max_memory=budgets, dtype=dtype,
                                            no_split_module_classes=sorted(skeleton._no_split_modules or []))
    if any(d in ("cpu", "disk") for d in made.values()):
        free_gb = ", ".join(f"cuda:{d} {free[d] / 1e9:.1f} GB" for d in order)
        packing = " (whole decoder layers do not pack into it)" if need <= sum(budgets.values()) else ""
        raise ModelLoadError(
            f"the weights need {need / 1e9:.1f} GB in {str(dtype).removeprefix('torch.')}; the {len(order)} GPUs have "
            f"{sum(free.values()) / 1e9:.1f} GB free ({free_gb}), {sum(budgets.values()) / 1e9:.1f} GB of it for weights "
            f"after {headroom:.0%} of each is kept for activations and caches{packing}")
    out = {name: order[d] for name, d in made.items()}
    if ROTARY in out:  # cos/sin made where the inputs are (it holds no weights)
        out[ROTARY] = device_of(out, EMBEDDING)
    check(out, skeleton)
    return out


def gpu_plan(skeleton: nn.Module, dtype: torch.dtype, device: torch.device) -> dict[str, int] | None:
    """:func:`plan` over this machine's GPUs (free memory read now), for a model loading onto
    ``device``; None (everything on ``device``) off CUDA, where the weights fit it, and, with a
    warning, where they do not but there is no other GPU or accelerate is not installed."""
    if device.type != "cuda":
        return None
    first = device.index if device.index is not None else torch.cuda.current_device()
    free = {first: torch.cuda.mem_get_info(first)[0]}
    need = weights_bytes(skeleton, dtype)
    if need <= budget(free[first]):
        return None
    others = [i for i in range(torch.cuda.device_count()) if i != first]
    try:
        import accelerate  # noqa: F401
    except ImportError:
        log.warning("the weights (%.1f GB) may not fit %s (%.1f GB free); install infill[multi-gpu] (accelerate) to "
                    "spread them over the GPUs", need / 1e9, device, free[first] / 1e9)
        return None
    if not others:
        log.warning("the weights (%.1f GB) may not fit %s (%.1f GB free), the only GPU", need / 1e9, device,
                    free[first] / 1e9)
        return None
    free.update({i: torch.cuda.mem_get_info(i)[0] for i in others})
    out = plan(skeleton, dtype, free, first)
    layers = Counter(device_of(out, f"{LAYERS}{i}") for i in range(len(skeleton.model.layers)))
    log.info("the weights (%.1f GB) do not fit %s (%.1f GB free): decoder layers %s", need / 1e9, device,
             free[first] / 1e9, ", ".join(f"{n} on cuda:{d}" for d, n in layers.items()))
    return out


def dispatch(hf: nn.Module, plan: Mapping[str, object]) -> None:
    """Apply ``plan`` to a model whose tensors already sit where it says: accelerate's hooks move each
    planned module's inputs to its device (the model's cache objects pass untouched)."""
    import accelerate

    accelerate.dispatch_model(hf, device_map=dict(plan), main_device=device_of(plan, EMBEDDING), force_hooks=True,
                              skip_keys=sorted(getattr(hf, "_skip_keys_device_placement", None) or []))
