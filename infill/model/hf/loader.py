"""Load a local Hugging Face checkpoint of an open diffusion LM into transformers' stock classes.

Registered (infill/model/registry.py) for the keys config.json names: ``DreamModel`` / ``Dream``
(Dream-v0, Dream-Coder-v0, DreamOn-v0, DiffuCoder), ``LLaDAModelLM`` / ``llada``, and
``Qwen2ForCausalLM`` / ``qwen2`` (Open-dCoder; a plain causal Qwen2 such as Qwen2.5-Coder is
refused: no mask token) and ``LlamaForCausalLM`` / ``llama`` (refused the same way).

Local files only: config.json is parsed here (Dream's ``model_type`` is unknown to AutoConfig),
the tensors are read with safetensors from ``model.safetensors`` or the shards that
``model.safetensors.index.json`` names, into a model built on the meta device (nothing is ever
run on random weights: every parameter must come from the checkpoint). No trust_remote_code, no
network, nothing unpickled.

Each family's conventions are read from the checkpoint and asserted: the mask, EOS, pad and BOS
ids (config.json, else the tokenizer's named special tokens, else the family's token names; where
two sources name one they must agree), that the mask id is a special token of the tokenizer (or,
as LLaDA's, a reserved id inside the model's vocabulary), that the tokenizer's ids fit the
model's vocabulary (a vocabulary padded past the tokenizer is normal), and the tensor shapes.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from infill.errors import ModelLoadError
from infill.model import shards
from infill.model.hf import adapter as window_adapter
from infill.model.hf import attention, families, int8, placement
from infill.model.hf.families import Family
from infill.model.hf.tokenizer import HFTokenizer, load_hf_tokenizer, special_token_names

log = logging.getLogger(__name__)

ATTN_IMPLEMENTATION = attention.NAME  # sdpa, grouped for a few queries; "sdpa" or "eager" work too (the mask is additive)


def _id_or_none(value):
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, int) and value >= 0 else None


def detect(directory: Path, data: dict, tok: HFTokenizer | None = None) -> Family:
    keys = set(filter(None, [*(data.get("architectures") or []), data.get("model_type")]))
    if keys & set(families.DREAM_KEYS):
        return families.DREAM
    if keys & set(families.LLADA_KEYS):
        return families.LLADA
    if keys & set(families.QWEN2_KEYS) | keys & set(families.LLAMA_KEYS):
        return families.OPEN_DCODER if keys & set(families.QWEN2_KEYS) else None
    raise ModelLoadError(f"{directory}: unknown architecture {sorted(keys)}")


def special_ids(directory: Path, data: dict, tok, family: Family, path: Path) -> dict[str, int | None]:
    """mask, eos, pad, bos ids: config.json, else the tokenizer's named special tokens (the two
    must agree where both name one), else the family's token names (mask only)."""
    named = special_token_names(directory)
    out: dict[str, int | None] = {}
    for role in ("mask", "eos", "pad", "bos"):
        from_config = _id_or_none(data.get(f"{role}_token_id"))
        text = named.get(role)
        from_tok = tok.id_of(text) if text is not None else None
        if from_config is not None and from_tok is not None and from_config != from_tok and role == "mask":
            raise ModelLoadError(f"{path}: mask_token_id {from_config} but the tokenizer's mask token {text!r} is {from_tok}")
        if role == "bos":  # the lead token: what the family's own prompts prepend (tokenizer.bos_token)
            out[role] = from_tok if from_tok is not None else from_config
        else:
            out[role] = from_config if from_config is not None else from_tok
    if out["mask"] is None:
        out["mask"] = next((tok.id_of(n) for n in family.mask_names if tok.id_of(n) is not None), None)
    return out


def load(directory: Path, data: dict, device: torch.device, dtype: torch.dtype, cache_mode: str = "exact", *,
         dense: bool = False, adapter: bool = True):
    """The model and tokenizer of a Dream / LLaDA / Open-dCoder checkpoint directory, or of a causal
    Llama / Qwen2 one (with the window adapter its config.json names, unless ``adapter`` is False).
    ``dense``: int8 weights dequantized whatever the device (a network to train through)."""
    from infill.model.hf.model import HFDiffusionModel

    directory = Path(directory)
    path = directory / "config.json"
    keys = set(filter(None, [*(data.get("architectures") or []), data.get("model_type")]))
    raw_tok = load_hf_tokenizer(directory)
    family = detect(directory, data)
    probe = HFTokenizer(raw_tok, pad_id=-1, mask_id=-1, eos_id=-1)
    ids = special_ids(directory, data, probe, family or families.OPEN_DCODER, path)
    if family is None or (family is families.OPEN_DCODER and ids["mask"] is None):
        family = families.CAUSAL_QWEN2 if keys & set(families.QWEN2_KEYS) else families.CAUSAL_LLAMA
        ids["mask"] = ids["mask"] if ids["mask"] is not None else _placeholder(probe, ids)
    if ids["mask"] is None:
        raise ModelLoadError(f"{path}: no mask token (mask_token_id, or {' / '.join(family.mask_names)} in the tokenizer)")
    if ids["eos"] is None:
        raise ModelLoadError(f"{path}: no EOS token (eos_token_id, or the tokenizer's eos_token)")
    mask_id, eos_id = ids["mask"], ids["eos"]
    pad_id = ids["pad"] if ids["pad"] is not None else eos_id
    lead_id = ids["bos"] if ids["bos"] is not None else eos_id
    if mask_id in (eos_id, pad_id):
        raise ModelLoadError(f"{path}: the mask id {mask_id} is also the EOS/pad id")

    files = shards.files(directory)
    fields = families.stock_config(family, data, path)
    names = {n: families.stock_name(family, n) for n in files}
    unmapped = sorted(n for n, s in names.items() if s is None and not n.endswith("inv_freq"))
    if unmapped:
        raise ModelLoadError(f"{directory}: tensors the {family.stock} layout has no place for, e.g. {unmapped[0]} "
                             f"(is this a {family.key} checkpoint?)")
    rows = _embedding_rows(files, names, directory)
    if rows != fields["vocab_size"]:
        raise ModelLoadError(f"{path}: vocab_size {fields['vocab_size']} but the embedding has {rows} rows")
    if fields["intermediate_size"] is None:
        fields["intermediate_size"] = _shape(files, names, "model.layers.0.mlp.gate_proj.weight", directory)[0]

    tokenizer = HFTokenizer(raw_tok, pad_id=pad_id, mask_id=mask_id, eos_id=eos_id)
    if tokenizer.vocab_size > rows:
        raise ModelLoadError(f"{directory}: the tokenizer has ids up to {tokenizer.vocab_size - 1}, past the model's "
                             f"vocabulary of {rows} (tokenizer and weights do not belong together)")
    for role, i in (("mask", mask_id), ("EOS", eos_id), ("pad", pad_id), ("BOS", lead_id)):
        if not 0 <= i < rows:
            raise ModelLoadError(f"{path}: the {role} id {i} is outside the model's vocabulary of {rows}")
    if mask_id < tokenizer.vocab_size and not (tokenizer.is_added(mask_id) or mask_id in tokenizer.special_ids
                                               or _looks_special(tokenizer.text_of(mask_id))):
        raise ModelLoadError(f"{path}: the mask id {mask_id} is the ordinary token {tokenizer.text_of(mask_id)!r} "
                             "in the tokenizer")
    expand_id = tokenizer.id_of(families.DREAM.expand_name or "<|expand|>") if family is families.DREAM else None
    variant = _variant(family, tokenizer, data, expand_id)
    end_ids = {eos_id, pad_id}
    eot = tokenizer.id_of("<|eot_id|>")
    if family is families.LLADA and eot is not None:
        end_ids.add(eot)

    hf = _build(family, fields, data)
    _load_weights(hf, files, names, family, device, dtype, directory, bool(fields["tie_word_embeddings"]),
                  None if dense else _grid(data, path), dense)
    trained = min(family.trained_context, int(fields["max_position_embeddings"]))
    model_cls = HFDiffusionModel
    if family.causal:
        from infill.model.hf.causal import CausalLM as model_cls
    model = model_cls(
        hf, family, mask_id=mask_id, pad_id=pad_id, eos_id=eos_id, lead_id=lead_id,
        tokenizer_size=tokenizer.vocab_size, special_ids=tokenizer.special_ids | ({expand_id} if expand_id is not None else set()),
        end_ids=frozenset(end_ids), max_context=int(data.get("context_tokens") or max(64, trained * 3 // 4)), name=data.get("name") or directory.name,
        cache_mode=cache_mode, variant=variant, expand_id=expand_id,
    )
    if adapter and data.get("adapter"):
        if not family.causal:
            raise ModelLoadError(f"{path}: a window adapter is for a causal model, and {family.key} is not one")
        try:
            model.set_adapter(window_adapter.load(directory, data, list(hf.model.layers), dtype, model.stacked))
        except ValueError as e:
            raise ModelLoadError(str(e)) from None
    log.info("loaded %s (%s, %s logits; mask %d, eos %d, pad %d, lead %d) on %s in %s", directory.name, variant,
             "shifted" if family.shifted else "unshifted", mask_id, eos_id, pad_id, lead_id, device, dtype)
    return model.eval(), tokenizer


def _placeholder(tok: HFTokenizer, ids: dict) -> int | None:
    """A causal model's stand-in for a masked slot: a special token that is not EOS, pad or BOS
    (never attended to, and never proposed: special tokens are banned from fills)."""
    taken = {ids["eos"], ids["pad"], ids["bos"]}
    return next((i for i in sorted(tok.special_ids) if i >= 0 and i not in taken), None)


def _looks_special(text: str | None) -> bool:
    return bool(text) and text.startswith("<") and text.endswith(">")


def _variant(family: Family, tokenizer: HFTokenizer, data: dict, expand_id) -> str:
    if family is not families.DREAM:
        return family.key
    if expand_id is not None:
        return "dreamon"
    if tokenizer.id_of("<|dlm_pad|>") is not None:
        return "diffucoder"
    return "dream"


def _shape(files, names, stock: str, directory: Path) -> tuple[int, ...]:
    from safetensors import safe_open

    src = next((n for n, s in names.items() if s == stock), None)
    if src is None:
        raise ModelLoadError(f"{directory}: no tensor for {stock}")
    with safe_open(str(files[src]), "pt") as f:
        return tuple(f.get_slice(src).get_shape())


def _embedding_rows(files, names, directory: Path) -> int:
    return _shape(files, names, "model.embed_tokens.weight", directory)[0]


def _build(family: Family, fields: dict, data: dict):
    """The stock model on the meta device (no memory, no random init to overwrite)."""
    rope = {"rope_type": "default", "rope_theta": fields["rope_theta"]}
    if isinstance(fields.get("rope_scaling"), dict):
        rope = {**fields["rope_scaling"], "rope_theta": fields["rope_theta"]}
        rope["rope_type"] = rope.pop("type", rope.get("rope_type", "default"))
    common = dict(
        vocab_size=fields["vocab_size"], hidden_size=fields["hidden_size"], intermediate_size=fields["intermediate_size"],
        num_hidden_layers=fields["num_hidden_layers"], num_attention_heads=fields["num_attention_heads"],
        num_key_value_heads=fields["num_key_value_heads"], rms_norm_eps=fields["rms_norm_eps"],
        max_position_embeddings=fields["max_position_embeddings"], tie_word_embeddings=fields["tie_word_embeddings"],
        rope_parameters=rope, hidden_act="silu", use_cache=False,
    )
    if fields["hidden_size"] % fields["num_attention_heads"]:
        raise ModelLoadError("config.json: hidden_size is not a multiple of the number of attention heads")
    if family.stock == "qwen2":
        from transformers import Qwen2Config, Qwen2ForCausalLM

        cfg = Qwen2Config(**common, use_sliding_window=False)
        cls = Qwen2ForCausalLM
    else:
        from transformers import LlamaConfig, LlamaForCausalLM

        cfg = LlamaConfig(**common, attention_bias=False, mlp_bias=False)
        cls = LlamaForCausalLM
    if any(t != "full_attention" for t in (getattr(cfg, "layer_types", None) or ["full_attention"])):
        raise ModelLoadError("config.json: layers other than full attention (sliding windows) are not supported")
    cfg._attn_implementation = ATTN_IMPLEMENTATION
    with torch.device("meta"):
        return cls(cfg)


def _grid(data: dict, path: Path) -> tuple[int, str] | None:
    """config.json's ``quantization.grid`` (``{"bits": 4, "group": G, "prefix": P}``: the int8
    weights whose names start with P were rounded from a 4-bit grid in groups of G, infill/model/hf/int8.py)
    as (G, P), or None."""
    quant = data.get("quantization")
    spec = quant.get("grid") if isinstance(quant, dict) else None
    if spec is None:
        return None
    ok = (isinstance(spec, dict) and spec.get("bits") == int8.GRID_BITS and spec.get("group") in int8.GRID_GROUPS
          and isinstance(spec.get("prefix", ""), str))
    if not ok:
        raise ModelLoadError(f"{path}: quantization.grid must be {{\"bits\": {int8.GRID_BITS}, \"group\": one of "
                             f"{', '.join(map(str, int8.GRID_GROUPS))}, \"prefix\": a tensor name prefix}}, not {spec!r}")
    return spec["group"], spec.get("prefix", "")


def _load_weights(hf, files, names, family, device, dtype, directory: Path, tied: bool,
                  grid: tuple[int, str] | None = None, dense: bool = False) -> None:
    from safetensors import safe_open

    expected = {k: tuple(v.shape) for k, v in hf.state_dict().items()}
    if tied:
        expected.pop("lm_head.weight", None)
    by_file: dict[Path, list[str]] = {}
    for n, f in files.items():
        if names[n] is not None:
            by_file.setdefault(f, []).append(n)
    state = {}
    for f, tensor_names in by_file.items():
        try:
            with safe_open(str(f), "pt", device="cpu") as handle:
                for n in tensor_names:
                    state[names[n]] = handle.get_tensor(n)
        except ModelLoadError:
            raise
        except Exception as e:
            raise ModelLoadError(f"{f}: corrupt weights ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    state, int8_rows = _dequantized(state, directory, device, dtype, dense)
    if tied and "lm_head.weight" in state and not torch.equal(state["lm_head.weight"], state["model.embed_tokens.weight"]):
        tied = False  # a checkpoint that stores its own head uses it
        expected["lm_head.weight"] = tuple(hf.lm_head.weight.shape)
    state.pop("lm_head.weight", None) if tied else None
    # A tied head over int8 embeddings multiplies the int8 rows (a step reads a quarter of the bytes);
    # the lookup keeps the dequantized copy.
    embedding = int8_rows.pop("model.embed_tokens.weight", None)
    if tied and embedding is not None:
        int8_rows["lm_head.weight"], tied = embedding, False
    got = {k: tuple(v.shape) for k, v in state.items()}
    missing = sorted(set(expected) - set(got))
    wrong = sorted(k for k in set(expected) & set(got) if expected[k] != got[k])
    extra = sorted(set(got) - set(expected))
    if missing or wrong or extra:
        parts = []
        if missing:
            parts.append(f"missing {missing[0]}" + (f" and {len(missing) - 1} more" if len(missing) > 1 else ""))
        if wrong:
            parts.append(f"{wrong[0]} is {got[wrong[0]]}, config.json implies {expected[wrong[0]]}")
        if extra:
            parts.append(f"unexpected {extra[0]}")
        raise ModelLoadError(f"{directory}: weights do not match config.json ({'; '.join(parts)})")
    plan = placement.gpu_plan(hf, dtype, device)  # None: all on ``device``
    where = (lambda name: placement.device_of(plan, name)) if plan else (lambda name: device)
    grid = grid if grid and int8.grid_kernel_fast() else None  # (elsewhere the int8 kernel is the faster)
    for k, (q, scale) in int8_rows.items():  # kept as int8: multiplied so (infill/model/hf/int8.py)
        try:
            int8.install(hf, k, q, scale, dtype, grid[0] if grid and k.startswith(grid[1]) else None)
        except int8.OffGrid as e:
            raise ModelLoadError(f"{directory}: {k}: {e}, as config.json's quantization.grid claims") from None
        state.pop(k, None)
    state = {k: v.to(where(k)) for k, v in state.items()}
    hf.load_state_dict(state, strict=False, assign=True)
    if tied:
        hf.lm_head.weight = hf.model.embed_tokens.weight
    # Non-persistent buffers (rotary frequencies) were built on the meta device: build them again.
    rotary_cls = type(hf.model.rotary_emb)
    hf.model.rotary_emb = rotary_cls(config=hf.config).to(where(placement.ROTARY))
    for name, buf in list(hf.named_buffers()):
        if buf.is_meta:
            raise ModelLoadError(f"{directory}: internal error, buffer {name} was not initialised")
    if plan:
        placement.dispatch(hf, plan)


def _dequantized(state: dict, directory: Path, device: torch.device, dtype: torch.dtype,
                 dense: bool = False) -> tuple[dict, dict]:
    """The tensors in ``dtype``, int8 ones (with their ``_scale``) dequantized, except the linear
    weights (the layers' and the head's) where int8 runs on ``device``: those come back apart, as
    (int8, scale). An int8 embedding is both: dequantized for the lookup, and apart for a tied head."""
    state, scales = int8.split_scales(state)
    kept = {}
    runs = int8.int8_runs_on(device, dtype) and not dense
    for k, v in list(state.items()):
        if v.dtype != torch.int8:
            state[k] = v.to(dtype)
            continue
        if k not in scales:
            raise ModelLoadError(f"{directory}: {k} is int8 with no {k}{int8.SCALE_SUFFIX}")
        scale = scales.pop(k)
        if runs and (k.startswith("model.layers.") or k in ("lm_head.weight", "model.embed_tokens.weight")):
            kept[k] = (v, scale)
        if not (runs and (k.startswith("model.layers.") or k == "lm_head.weight")):
            state[k] = int8.dequantize(v, scale, dtype)
    if scales:
        raise ModelLoadError(f"{directory}: {next(iter(scales))}{int8.SCALE_SUFFIX} scales no int8 weight")
    return state, kept


def register_all(register) -> None:
    """Register the loaders with infill/model/registry.py's ``register``."""
    for key in (*families.DREAM_KEYS, *families.LLADA_KEYS, *families.QWEN2_KEYS, *families.LLAMA_KEYS):
        register(key, load)
