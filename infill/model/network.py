"""The diffusion model: a transformer with a context/window attention layout, and its files.

What it is: token ids in, per-position logits out. No loss, no sampling, no tokenizer logic.

Attention layout (see the design notes, "Why the attention layout of our own model matters"):
the text outside the holes is split into *segments* (prefix, the text between holes, suffix).
Each segment is read causally and only sees itself; each fill *window* (one per hole) sees all
segments and all windows, bidirectionally. Positions are document order, a window taking as many
positions as it has slots. Because a segment only attends to itself with rotary positions, its
hidden states do not depend on where it sits, so its keys (before rotation) and values can be
computed once, cached, and reused exactly: across denoising steps, across candidates whose
windows differ in length, and across keystrokes that append to the prefix.

A model directory has the Hugging Face layout: ``config.json`` (architecture, sizes, special
token ids, training facts), ``model.safetensors`` and ``tokenizer.json``. Loading never
unpickles anything.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from infill.errors import ModelLoadError
from infill.model import shards
from infill.model.seam import Capabilities

ARCHITECTURE = "infill-segment-window-v1"


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 8192
    d_model: int = 256
    n_layers: int = 6
    n_heads: int = 4
    d_ff: int = 704  # SwiGLU hidden size (about 8/3 d_model)
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    max_context: int = 1024  # tokens of context the model was trained on (the engine's budget)
    pad_id: int = 0  # an empty slot at the end of a fill window
    mask_id: int = 1
    eos_id: int = 2

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def n_params(self) -> int:
        d, f = self.d_model, self.d_ff
        per_layer = 4 * d * d + 3 * d * f + 2 * d
        return self.vocab_size * d + self.n_layers * per_layer + d


# ----------------------------------------------------------------------------------------------
# Pure functions: rotary embeddings and the attention mask of a layout.


def rope_cos_sin(pos: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of shape pos.shape + (head_dim // 2,), in float32."""
    inv = theta ** (-torch.arange(0, head_dim, 2, device=pos.device, dtype=torch.float32) / head_dim)
    ang = pos.to(torch.float32)[..., None] * inv
    return ang.cos(), ang.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x[..., :h], x[..., h:]) of x [B, H, L, D] by angles cos/sin [B, L, D/2]."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h].float(), x[..., h:].float()
    c, s = cos[:, None], sin[:, None]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def layout_mask(pos: torch.Tensor, seg: torch.Tensor, is_win: torch.Tensor) -> torch.Tensor:
    """Which key each query may attend to, [B, 1, L, L] bool.

    ``seg`` is the segment number of a context token, -1 for batch padding (and ignored for
    window slots); ``is_win`` marks fill-window slots. A window slot sees every real token; a
    context token sees earlier tokens of its own segment; padding sees only itself.
    """
    real = (seg >= 0) | is_win
    same_seg = (seg[:, :, None] == seg[:, None, :]) & (seg[:, :, None] >= 0)
    ctx_q = ~is_win[:, :, None] & ~is_win[:, None, :] & same_seg & (pos[:, None, :] <= pos[:, :, None])
    win_q = is_win[:, :, None] & real[:, None, :]
    eye = torch.eye(pos.shape[1], dtype=torch.bool, device=pos.device)[None]
    return (ctx_q | win_q | eye)[:, None]


# ----------------------------------------------------------------------------------------------
# The network.


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.wqkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.wo = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.w_gate_up = nn.Linear(cfg.d_model, 2 * cfg.d_ff, bias=False)
        self.w_down = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Unrotated q, k, v of shape [B, H, L, D]."""
        B, L, _ = x.shape
        q, k, v = self.wqkv(self.attn_norm(x)).view(B, L, 3, self.cfg.n_heads, self.cfg.head_dim).unbind(2)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def finish(self, x: torch.Tensor, att: torch.Tensor) -> torch.Tensor:
        """Residual after attention output att [B, H, L, D], then the MLP."""
        B, H, L, D = att.shape
        x = x + self.wo(att.transpose(1, 2).reshape(B, L, H * D))
        gate, up = self.w_gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.w_down(F.silu(gate) * up)


@dataclass
class ContextCache:
    """Per-layer unrotated keys and values of encoded context segments, [B, H, Lc, D] each."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    valid: torch.Tensor  # [B, Lc] bool: real tokens (False for batch padding)

    @property
    def length(self) -> int:
        return self.valid.shape[1]


@dataclass
class BoundContext:
    """A context cache bound to candidate rows: keys rotated to each row's absolute positions.

    For a fill, window_hidden grows the key/value tensors once by the window's width and then
    writes only the window part at each step, and keeps the window's rotary angles, so a step
    copies nothing of the (much longer) context.
    """

    keys: list[torch.Tensor]  # [R, H, Lc (+ W), D]
    values: list[torch.Tensor]
    valid: torch.Tensor  # [R, Lc]
    _rope: tuple | None = None  # (window positions, cos, sin) of the last step

    def select(self, rows: torch.Tensor) -> "BoundContext":
        """The same context for rows ``rows`` [n] only (a copy; window parts are rewritten at each step)."""
        return BoundContext([k.index_select(0, rows) for k in self.keys], [v.index_select(0, rows) for v in self.values],
                            self.valid.index_select(0, rows))

    @staticmethod
    def join(parts: list["BoundContext"], width: int = 0) -> "BoundContext":
        """The rows of several bound contexts as one, each context padded to the longest (its padding
        not valid), with room for ``width`` window slots already made (infill/engine/stepper.py)."""
        lc = max(p.valid.shape[1] for p in parts)
        R = sum(p.valid.shape[0] for p in parts)

        def cat(tensors: list[torch.Tensor]) -> torch.Tensor:
            t0 = tensors[0]
            out = t0.new_zeros(R, t0.shape[1], lc + width, t0.shape[3])
            at = 0
            for p, t in zip(parts, tensors):
                n, n_lc = t.shape[0], p.valid.shape[1]
                out[at : at + n, :, :n_lc] = t[:, :, :n_lc]
                at += n
            return out

        keys = [cat([p.keys[i] for p in parts]) for i in range(len(parts[0].keys))]
        values = [cat([p.values[i] for p in parts]) for i in range(len(parts[0].values))]
        valid = parts[0].valid.new_zeros(R, lc)
        at = 0
        for p in parts:
            valid[at : at + p.valid.shape[0], : p.valid.shape[1]] = p.valid
            at += p.valid.shape[0]
        return BoundContext(keys, values, valid)

    def make_room(self, width: int) -> None:
        """Append room for ``width`` window slots to every layer's keys and values (once)."""
        n = self.valid.shape[1] + width
        if not self.keys or self.keys[0].shape[2] == n:
            return
        lc = self.valid.shape[1]

        def grow(t: torch.Tensor) -> torch.Tensor:
            out = t.new_zeros(t.shape[0], t.shape[1], n, t.shape[3])
            out[:, :, :lc] = t[:, :, :lc]
            return out

        self.keys = [grow(k) for k in self.keys]
        self.values = [grow(v) for v in self.values]


class DiffusionLM(nn.Module):
    """The network, and the seam's DiffusionModel (infill/model/seam.py) for serving: a segment
    encodes to its own unrotated keys and values, exact wherever it sits."""

    capabilities = Capabilities(exact_segment_cache=True)
    languages: tuple[str, ...] | None = None  # the registry sets config.json's "languages"

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.name = ARCHITECTURE  # the registry names a loaded model after its directory
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.apply(self._init)
        for b in self.blocks:  # scale residual projections by depth (GPT-2 style)
            nn.init.normal_(b.wo.weight, std=0.02 / math.sqrt(2 * cfg.n_layers))
            nn.init.normal_(b.w_down.weight, std=0.02 / math.sqrt(2 * cfg.n_layers))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    # -- the seam's facts ----------------------------------------------------------------------

    @property
    def mask_id(self) -> int:
        return self.cfg.mask_id

    @property
    def pad_id(self) -> int:
        return self.cfg.pad_id

    @property
    def eos_id(self) -> int:
        return self.cfg.eos_id

    @property
    def vocab_size(self) -> int:
        return self.cfg.vocab_size

    @property
    def max_context(self) -> int:
        return self.cfg.max_context

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.weight.dtype

    @property
    def n_params(self) -> int:
        return self.cfg.n_params()

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(h), self.embed.weight)  # tied output embedding

    def _rope(self, pos: torch.Tensor):
        return rope_cos_sin(pos, self.cfg.head_dim, self.cfg.rope_theta)

    def forward(self, ids: torch.Tensor, pos: torch.Tensor, seg: torch.Tensor, is_win: torch.Tensor) -> torch.Tensor:
        """Logits [B, L, V] for a whole layout at once (the reference for tests)."""
        return self.logits(self.hidden(ids, pos, seg, is_win))

    def hidden(self, ids: torch.Tensor, pos: torch.Tensor, seg: torch.Tensor, is_win: torch.Tensor) -> torch.Tensor:
        """Final hidden states [B, L, d] of a whole layout (training takes logits of window slots only)."""
        mask = layout_mask(pos, seg, is_win)
        cos, sin = self._rope(pos)
        x = self.embed(ids)
        for b in self.blocks:
            q, k, v = b.qkv(x)
            att = F.scaled_dot_product_attention(apply_rope(q, cos, sin), apply_rope(k, cos, sin), v, attn_mask=mask)
            x = b.finish(x, att)
        return x

    @torch.no_grad()
    def encode_context(self, ids: torch.Tensor, seg: torch.Tensor) -> ContextCache:
        """Run context segments once. ids/seg [B, Lc]; seg -1 marks padding.

        Each segment is laid out at local positions 0..n-1 (its states do not depend on where it
        sits); the cache keeps keys unrotated so they can be placed anywhere later.
        """
        B, L = ids.shape
        valid = seg >= 0
        starts = torch.ones_like(seg, dtype=torch.bool)
        starts[:, 1:] = seg[:, 1:] != seg[:, :-1]
        idx = torch.arange(L, device=ids.device).expand(B, L)
        seg_start = torch.cummax(torch.where(starts, idx, torch.zeros_like(idx)), dim=1).values
        local = idx - seg_start
        mask = layout_mask(local, seg, torch.zeros_like(valid))
        cos, sin = self._rope(local)
        x = self.embed(ids)
        keys, values = [], []
        for b in self.blocks:
            q, k, v = b.qkv(x)
            keys.append(k)
            values.append(v)
            att = F.scaled_dot_product_attention(apply_rope(q, cos, sin), apply_rope(k, cos, sin), v, attn_mask=mask)
            x = b.finish(x, att)
        return ContextCache(keys, values, valid)

    def prefetch(self, context: list[int]) -> None:
        """Nothing: this model keeps no states across fills itself (the engine's context cache keeps its
        segments, infill/model/context_cache.py), so it has none to encode ahead (prefix_cache is False)."""

    @torch.no_grad()
    def extend_segments(self, heads: list[tuple[list[torch.Tensor], list[torch.Tensor]]],
                        ids: list[list[int]]) -> list[tuple[list[torch.Tensor], list[torch.Tensor]]]:
        """Append tokens to encoded segments, all in one pass: ``heads[b]`` holds one segment's
        unrotated keys and values (per layer [1, H, n_b, D]), ``ids[b]`` its m_b new tokens.

        Exact: a segment is causal, so its first n_b tokens' states do not depend on what follows;
        each new token attends to its own segment's head and the new tokens before it. This is how
        typing at the cursor costs only the new prefix tokens, for every document of a batch at once.
        """
        B, dev = len(ids), heads[0][0][0].device
        n = torch.tensor([h[0][0].shape[2] for h in heads], device=dev)[:, None]  # [B, 1]
        m = torch.tensor([len(x) for x in ids], device=dev)[:, None]
        N, M = int(n.max()), int(m.max())
        new = torch.full((B, M), self.cfg.pad_id, dtype=torch.long, device=dev)
        for b, x in enumerate(ids):
            new[b, : len(x)] = torch.tensor(x, dtype=torch.long, device=dev)
        i, j = torch.arange(N, device=dev)[None], torch.arange(M, device=dev)[None]
        q_pos = n + j  # [B, M]: the new tokens follow their own head
        cos_q, sin_q = self._rope(q_pos)
        cos_k, sin_k = self._rope(torch.cat([i.expand(B, N), q_pos], dim=1))
        key_ok = torch.cat([i < n, j < m], dim=1)  # [B, N + M]: real keys of each row
        causal = torch.cat([torch.ones(M, N, dtype=torch.bool, device=dev),
                            torch.ones(M, M, dtype=torch.bool, device=dev).tril()], dim=1)
        mask = (key_ok[:, None, :] & causal[None])[:, None]  # [B, 1, M, N + M]

        def padded(per_row: list[torch.Tensor]) -> torch.Tensor:
            out = per_row[0].new_zeros(B, per_row[0].shape[1], N, per_row[0].shape[3])
            for b, t in enumerate(per_row):
                out[b, :, : t.shape[2]] = t[0]
            return out

        x = self.embed(new)
        out = [([], []) for _ in range(B)]
        for layer, blk in enumerate(self.blocks):
            q, k, v = blk.qkv(x)
            past_k, past_v = padded([h[0][layer] for h in heads]), padded([h[1][layer] for h in heads])
            keys, values = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
            att = F.scaled_dot_product_attention(apply_rope(q, cos_q, sin_q), apply_rope(keys, cos_k, sin_k), values,
                                                 attn_mask=mask)
            x = blk.finish(x, att)
            for b, (ks, vs) in enumerate(out):
                mb = len(ids[b])
                ks.append(torch.cat([heads[b][0][layer], k[b : b + 1, :, :mb]], dim=2))
                vs.append(torch.cat([heads[b][1][layer], v[b : b + 1, :, :mb]], dim=2))
        return out

    @torch.no_grad()
    def encode_segments(self, segments: list[list[int]]) -> list[tuple[list[torch.Tensor], list[torch.Tensor]]]:
        """Each segment encoded alone, all in one batch: per segment its per-layer unrotated keys
        and values [1, H, n, D] (what extend_segments grows and join_segments concatenates)."""
        n = max(len(s) for s in segments)
        ids = torch.full((len(segments), n), self.cfg.pad_id, dtype=torch.long)
        seg_ids = torch.full((len(segments), n), -1, dtype=torch.long)
        for i, s in enumerate(segments):
            ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
            seg_ids[i, : len(s)] = 0
        cache = self.encode_context(ids.to(self.device), seg_ids.to(self.device))
        return [([k[i : i + 1, :, : len(s)] for k in cache.keys], [v[i : i + 1, :, : len(s)] for v in cache.values])
                for i, s in enumerate(segments)]

    @torch.no_grad()
    def join_segments(self, rows: list[list[tuple[list[torch.Tensor], list[torch.Tensor]]]]) -> ContextCache:
        """A ContextCache with one row per request, its encoded segments concatenated in order."""
        lengths = [sum(keys[0].shape[2] for keys, _ in segs) for segs in rows]
        L = max(1, max(lengths))
        B, H, D = len(rows), self.cfg.n_heads, self.cfg.head_dim
        dtype, device = self.dtype, self.device
        keys = [torch.zeros(B, H, L, D, dtype=dtype, device=device) for _ in range(self.cfg.n_layers)]
        values = [torch.zeros(B, H, L, D, dtype=dtype, device=device) for _ in range(self.cfg.n_layers)]
        valid = torch.zeros(B, L, dtype=torch.bool, device=device)
        for b, segs in enumerate(rows):
            at = 0
            for seg_keys, seg_values in segs:
                n = seg_keys[0].shape[2]
                for layer in range(self.cfg.n_layers):
                    keys[layer][b, :, at : at + n] = seg_keys[layer][0]
                    values[layer][b, :, at : at + n] = seg_values[layer][0]
                at += n
            valid[b, :at] = True
        return ContextCache(keys, values, valid)

    @torch.no_grad()
    def bind_context(self, cache: ContextCache, rows: torch.Tensor, pos: torch.Tensor) -> BoundContext:
        """Select cache rows ``rows`` [R] and rotate their keys to absolute positions ``pos`` [R, Lc]."""
        cos, sin = self._rope(pos)
        keys = [apply_rope(k.index_select(0, rows), cos, sin) for k in cache.keys]
        values = [v.index_select(0, rows) for v in cache.values]
        return BoundContext(keys, values, cache.valid.index_select(0, rows))

    @torch.no_grad()
    def window_logits(self, ids: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor, ctx: BoundContext) -> torch.Tensor:
        """Logits [R, W, V] of the window slots ids/pos/valid [R, W], attending to ctx and all windows."""
        return self.logits(self.window_hidden(ids, pos, valid, ctx))

    @torch.no_grad()
    def window_hidden(self, ids: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor, ctx: BoundContext) -> torch.Tensor:
        """Final hidden states [R, W, d] of the window slots (the sampler takes logits of masked ones)."""
        lc = ctx.valid.shape[1]
        ctx.make_room(ids.shape[1])
        if ctx._rope is None or ctx._rope[0] is not pos:
            ctx._rope = (pos, *self._rope(pos))
        _, cos, sin = ctx._rope
        key_ok = torch.cat([ctx.valid, valid], dim=1)[:, None, None, :]
        x = self.embed(ids)
        for b, k_all, v_all in zip(self.blocks, ctx.keys, ctx.values):
            q, k, v = b.qkv(x)
            k_all[:, :, lc:] = apply_rope(k, cos, sin)
            v_all[:, :, lc:] = v
            att = F.scaled_dot_product_attention(apply_rope(q, cos, sin), k_all, v_all, attn_mask=key_ok)
            x = b.finish(x, att)
        return x


# ----------------------------------------------------------------------------------------------
# Files: config.json + model.safetensors (+ tokenizer.json, read by the registry).


def config_to_json(cfg: ModelConfig, extra: dict | None = None) -> dict:
    return {"architecture": ARCHITECTURE, "model": asdict(cfg), **(extra or {})}


def config_from_json(data: dict) -> ModelConfig:
    if data.get("architecture") != ARCHITECTURE:
        raise ModelLoadError(f"config.json: architecture {data.get('architecture')!r} is not {ARCHITECTURE!r}")
    known = {f.name for f in fields(ModelConfig)}
    params = data.get("model", {})
    unknown = set(params) - known
    if unknown:
        raise ModelLoadError(f"config.json: unknown model fields {sorted(unknown)}")
    return ModelConfig(**params)


def parse_config(data: dict, path: Path) -> ModelConfig:
    """config_from_json, a malformed field reported against ``path``."""
    try:
        return config_from_json(data)
    except TypeError as e:
        raise ModelLoadError(f"{path}: bad model config ({e})") from None


def save_model(model: DiffusionLM, directory: Path, extra: dict | None = None, shard_bytes: int | None = None,
               dtype: torch.dtype | None = None) -> None:
    """Write config.json and the weights into directory (the tokenizer is saved by its owner): one
    model.safetensors, or with ``shard_bytes`` files of at most that many bytes of tensors
    (infill/model/shards.py); in ``dtype`` where given (floating tensors only)."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
    if dtype is not None:
        state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    for old in [*directory.glob("model*.safetensors"), directory / shards.INDEX]:
        old.unlink(missing_ok=True)  # the other layout's files, or more shards than now
    if shard_bytes is None:
        save_file(state, str(directory / shards.SINGLE))
    else:
        shards.write(state, directory, shard_bytes)
    (directory / "config.json").write_text(json.dumps(config_to_json(model.cfg, extra), indent=2) + "\n")


def read_config_json(directory: Path) -> dict:
    """The JSON of a model directory's config.json, whatever its architecture."""
    path = Path(directory) / "config.json"
    if not path.is_file():
        raise ModelLoadError(f"{directory}: no config.json (not a model directory)")
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelLoadError(f"{path}: unreadable config ({e})") from None


def read_config(directory: Path) -> tuple[ModelConfig, dict]:
    data = read_config_json(directory)
    return parse_config(data, Path(directory) / "config.json"), data


def load_model(directory: Path, device: str = "cpu", dtype: torch.dtype = torch.float32) -> DiffusionLM:
    """Build the model from config.json and load model.safetensors; never falls back to random weights."""
    cfg, _ = read_config(directory)
    return load_weights(directory, cfg, device, dtype)


def load_weights(directory: Path, cfg: ModelConfig, device: str = "cpu", dtype: torch.dtype = torch.float32) -> DiffusionLM:
    """The model of ``cfg`` with the weights of ``directory`` (model.safetensors or its shards)."""
    directory = Path(directory)
    weights = directory / shards.SINGLE
    state = shards.read(directory)
    with torch.device("meta"):
        model = DiffusionLM(cfg)
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in state.items()}
    if expected != got:
        missing = sorted(set(expected) - set(got))[:3]
        wrong = sorted(k for k in set(expected) & set(got) if expected[k] != got[k])[:3]
        raise ModelLoadError(
            f"{weights}: weights do not match config.json (missing {missing}, wrong shapes {wrong}, "
            f"unexpected {sorted(set(got) - set(expected))[:3]})"
        )
    model.load_state_dict(state, assign=True)
    return model.to(device=device, dtype=dtype).eval()
