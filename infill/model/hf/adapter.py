"""A window adapter: low-rank updates of a causal network's projections that are on only where the
network reads the fill window, never where it encodes the context.

A causal model's context (the lines further down shown as a snippet, then the text before the
hole) is encoded by the pretrained network as it is, so its states stay exactly the pretrained
model's and are kept and reused across fills and keystrokes as before. The adapter is on for the
window's slots and for the context token before each hole (whose state predicts the hole's first
slot): that is what it was trained on (infill/train/window_adapter.py), to write a fill that leads
into the code below the hole, which it reads in the snippet.

Each adapted projection ``W`` (out x in) gets ``x @ A.T @ B.T * scale`` added (A: rank x in,
B: out x rank, ``scale = alpha / rank``). The updates are forward hooks on the projection modules
(transformers' ``q_proj`` ... ``down_proj``, or the stacked q/k/v and gate/up products of
infill/model/hf/fused.py, whose update is the parts' side by side), so the network's own forward
code is unchanged; they add nothing unless the adapter is :meth:`WindowAdapter.on`.

Checkpoint: ``adapter.safetensors`` beside the model's weights, tensors
``layers.<i>.<projection>.A`` / ``.B``, and ``config.json``'s ``adapter`` entry (:class:`AdapterConfig`).
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
FILE = "adapter.safetensors"


@dataclass(frozen=True)
class AdapterConfig:
    rank: int = 16
    alpha: float = 32.0
    projections: tuple[str, ...] = PROJECTIONS
    suffix_lines: int = 24  # the lines further down it was trained to read (the engine shows it as many)
    file: str = FILE
    trained: dict = field(default_factory=dict)  # what the training recipe records: steps, examples, corpus, time

    @property
    def scale(self) -> float:
        return self.alpha / self.rank

    @staticmethod
    def from_json(data: dict) -> "AdapterConfig":
        known = {k: v for k, v in data.items() if k in AdapterConfig.__dataclass_fields__}
        if "projections" in known:
            known["projections"] = tuple(known["projections"])
        return AdapterConfig(**known)

    def to_json(self) -> dict:
        out = asdict(self)
        out["projections"] = list(self.projections)
        return out


def _owner(layer: nn.Module, name: str) -> nn.Module:
    return layer.self_attn if name in ("q_proj", "k_proj", "v_proj", "o_proj") else layer.mlp


class WindowAdapter(nn.Module):
    """The low-rank updates of every layer's adapted projections (``A``, ``B`` per layer and projection)."""

    def __init__(self, layers: list[nn.Module], config: AdapterConfig, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.config = config
        self.active = False
        self.A = nn.ParameterList()
        self.B = nn.ParameterList()
        self.index: dict[tuple[int, str], int] = {}
        for i, layer in enumerate(layers):
            for name in config.projections:
                proj = getattr(_owner(layer, name), name)
                self.index[(i, name)] = len(self.A)
                self.A.append(nn.Parameter(torch.zeros(config.rank, proj.in_features, dtype=dtype)))
                self.B.append(nn.Parameter(torch.zeros(proj.out_features, config.rank, dtype=dtype)))
        self._hooks: list = []

    def init_for_training(self, generator: torch.Generator) -> None:
        """A at random (scaled by its fan-in), B zero: an untrained adapter changes nothing."""
        with torch.no_grad():
            for a, b in zip(self.A, self.B):
                a.copy_(torch.randn(a.shape, generator=generator) / a.shape[1] ** 0.5)
                b.zero_()

    @contextlib.contextmanager
    def on(self, active: bool = True):
        """The updates on (or off) inside the block."""
        before, self.active = self.active, active
        try:
            yield
        finally:
            self.active = before

    def update(self, layer: int, names: tuple[str, ...], x: torch.Tensor) -> torch.Tensor:
        """The update of projections ``names`` of ``layer`` (side by side, as a stacked product's
        parts) for inputs ``x``, in x's dtype."""
        parts = []
        for name in names:
            k = self.index[(layer, name)]
            a, b = self.A[k], self.B[k]
            parts.append(((x.to(a.dtype) @ a.t()) @ b.t()) * self.config.scale)
        return (parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)).to(x.dtype)

    def attach(self, layers: list[nn.Module], stacked=None) -> None:
        """Hook the updates onto ``layers``' projections (and onto the stacked q/k/v and gate/up
        products of ``stacked``, infill/model/hf/fused.py's, where the network runs those)."""
        self.detach()
        groups = []  # (module, layer, projection names whose updates it adds)
        for i, layer in enumerate(layers):
            for name in self.config.projections:
                groups.append((getattr(_owner(layer, name), name), i, (name,)))
        if stacked is not None:
            for i in range(len(layers)):
                for module, names in ((stacked.qkv[i], ("q_proj", "k_proj", "v_proj")), (stacked.gate_up[i], ("gate_proj", "up_proj"))):
                    if all(n in self.config.projections for n in names):
                        groups.append((module, i, names))
                    elif any(n in self.config.projections for n in names):
                        raise ValueError(f"an adapter of only some of {names} cannot hook their stacked product")
        for module, i, names in groups:
            self._hooks.append(module.register_forward_hook(self._hook(i, names)))

    def _hook(self, layer: int, names: tuple[str, ...]):
        fused = None if any(p.requires_grad for p in self.parameters()) else self._fused(layer, names)

        def add(module, inputs, output):
            if not self.active:
                return None
            if fused is None:
                return output + self.update(layer, names, inputs[0])
            x = inputs[0].reshape(-1, inputs[0].shape[-1]).float()
            a, bt = fused  # the second product adds onto the projection's output in the same call
            out = output.reshape(-1, output.shape[-1]).float()
            return torch.addmm(out, x @ a.t(), bt).to(output.dtype).view(output.shape)
        return add

    def _fused(self, layer: int, names: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        """A frozen adapter's update of ``names`` as two products: their A's stacked, and their B's
        (scaled) as one block-diagonal matrix (a stacked product's parts side by side), transposed;
        both in float32, which multiplies these few thin rows in about two thirds of bf16's time on
        a CPU (a few rows through rank-16 to rank-48 products: a small bf16 product's fixed cost is
        most of it, bench/results/v2.29/adapter-dtype.txt)."""
        ks = [self.index[(layer, n)] for n in names]
        a = torch.cat([self.A[k].detach().float() for k in ks])
        b = torch.block_diag(*[self.B[k].detach().float() * self.config.scale for k in ks])
        return a.contiguous(), b.t().contiguous()

    def detach(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []

    # -- checkpoints -------------------------------------------------------------------------------

    def tensors(self, dtype: torch.dtype = torch.bfloat16) -> dict[str, torch.Tensor]:
        out = {}
        for (i, name), k in self.index.items():
            out[f"layers.{i}.{name}.A"] = self.A[k].detach().to("cpu", dtype).contiguous()
            out[f"layers.{i}.{name}.B"] = self.B[k].detach().to("cpu", dtype).contiguous()
        return out

    def load_tensors(self, tensors: dict[str, torch.Tensor], where: str) -> None:
        """Take ``tensors`` (as :meth:`tensors` names them); ValueError naming ``where`` if they do not fit."""
        want = {f"layers.{i}.{name}.{p}" for (i, name) in self.index for p in "AB"}
        if set(tensors) != want:
            missing, extra = sorted(want - set(tensors)), sorted(set(tensors) - want)
            raise ValueError(f"{where}: adapter tensors do not match its config"
                             + (f" (missing {missing[0]})" if missing else "") + (f" (unexpected {extra[0]})" if extra else ""))
        with torch.no_grad():
            for (i, name), k in self.index.items():
                for p, param in (("A", self.A[k]), ("B", self.B[k])):
                    t = tensors[f"layers.{i}.{name}.{p}"]
                    if tuple(t.shape) != tuple(param.shape):
                        raise ValueError(f"{where}: layers.{i}.{name}.{p} is {tuple(t.shape)}, the network needs {tuple(param.shape)}")
                    param.copy_(t.to(param.dtype))


def load(directory: Path, data: dict, layers: list[nn.Module], dtype: torch.dtype, stacked=None) -> WindowAdapter | None:
    """The window adapter that ``config.json`` (``data``) names, loaded and hooked onto ``layers``, or
    None where it names none. ValueError (one line) where its file is missing or does not fit."""
    entry = data.get("adapter")
    if not entry:
        return None
    from safetensors.torch import load_file

    config = AdapterConfig.from_json(entry)
    path = Path(directory) / config.file
    if not path.is_file():
        raise ValueError(f"{path}: the window adapter that config.json names is missing")
    try:
        tensors = load_file(str(path))
    except Exception as e:  # a truncated or corrupt file
        raise ValueError(f"{path}: corrupt adapter ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    adapter = WindowAdapter(layers, config, dtype)
    adapter.load_tensors(tensors, str(path))
    adapter.requires_grad_(False)
    adapter.attach(layers, stacked)  # frozen: each hook multiplies its parts' updates as one
    return adapter
