"""The open diffusion LM families we load into transformers' stock classes, and their conventions.

Plain causal (autoregressive) Qwen2 / Llama checkpoints load too, as the degenerate case of a
masked-diffusion model (``causal``): a slot's prediction sees only the tokens before it, so the
engine commits one slot at a time in document order (infill/model/seam.py's ``left_to_right``),
and the text after the last hole is never seen.

Facts come from each family's published model card and code (read, never run); every value that
matters is read from the checkpoint (config.json, the tokenizer's files, the tensors) and checked here at load time,
never taken from this table alone. What the table holds is how to *read* a family:

* which stock class it maps onto (Qwen2 or Llama) and how its tensor names map onto that class's;
* whether its logits are shifted (Dream family, Open-dCoder: the logits at position i predict
  token i+1) or not (LLaDA);
* where its special ids live (config.json fields, tokenizer special tokens by name);
* the context it was trained on (the engine's default budget is three quarters of it, leaving
  room for the fill windows).

Pure Python: nothing here imports torch or transformers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from infill.errors import ModelLoadError


@dataclass(frozen=True)
class Family:
    key: str  # our name for it (what results report next to the checkpoint's name)
    stock: str  # "qwen2" | "llama": the transformers class it loads into
    shifted: bool  # logits at position i predict token i + 1
    bos_leads: bool  # a BOS token leads every layout (the family's own infilling prompt has one)
    mask_names: tuple[str, ...]  # the mask token's text in the tokenizer, in order of preference
    trained_context: int  # tokens of layout (context + fills) the family was trained/evaluated on
    expand_name: str | None = None  # DreamOn's <|expand|> (one mask becomes two)
    causal: bool = False  # an autoregressive model: attention only to earlier positions, one slot at a time
    renamed: bool = False  # tensor names and config fields in another layout (LLaDA's OLMo style)
    note: str = ""


DREAM = Family("dream", "qwen2", shifted=True, bos_leads=True, mask_names=("<|mask|>",), trained_context=2048,
               note="Dream-v0, Dream-Coder-v0, DreamOn-v0 and DiffuCoder share the Dream architecture")
OPEN_DCODER = Family("open-dcoder", "qwen2", shifted=True, bos_leads=False, mask_names=("<M>", "[MASK]", "<|mask|>"),
                     trained_context=4096, note="Qwen2ForCausalLM continued as a masked diffusion model")
LLADA = Family("llada", "llama", shifted=False, bos_leads=True, mask_names=("<|mdm_mask|>",), trained_context=4096,
               renamed=True, note="LLaDA-8B: OLMo-style tensor names renamed onto Llama's")

# Causal models: no mask token is needed (a masked slot is never attended to: it stands in the layout
# only until its turn), and trained_context is read from config.json (max_position_embeddings).
CAUSAL_QWEN2 = Family("causal-qwen2", "qwen2", shifted=True, bos_leads=False, mask_names=(), trained_context=1 << 30,
                      causal=True, note="an autoregressive Qwen2 model, decoded left to right")
CAUSAL_LLAMA = Family("causal-llama", "llama", shifted=True, bos_leads=False, mask_names=(), trained_context=1 << 30,
                      causal=True, note="an autoregressive Llama model (e.g. SmolLM2), decoded left to right")

# config.json keys (``architectures`` entries, then ``model_type``) -> family. A Qwen2 checkpoint
# with a mask token in its tokenizer is Open-dCoder; without one, and a Llama one, is causal.
DREAM_KEYS = ("DreamModel", "Dream")
LLADA_KEYS = ("LLaDAModelLM", "llada")
QWEN2_KEYS = ("Qwen2ForCausalLM", "qwen2")
LLAMA_KEYS = ("LlamaForCausalLM", "llama")

# Tensor names: LLaDA's (OLMo-style) onto Llama's (open-dllms.md section 5.2).
_LLADA_RENAMES = [
    (r"^model\.transformer\.wte\.weight$", "model.embed_tokens.weight"),
    (r"^model\.transformer\.ln_f\.weight$", "model.norm.weight"),
    (r"^model\.transformer\.ff_out\.weight$", "lm_head.weight"),
    (r"^model\.transformer\.blocks\.(\d+)\.(q_proj|k_proj|v_proj)\.weight$", r"model.layers.\1.self_attn.\2.weight"),
    (r"^model\.transformer\.blocks\.(\d+)\.attn_out\.weight$", r"model.layers.\1.self_attn.o_proj.weight"),
    (r"^model\.transformer\.blocks\.(\d+)\.ff_proj\.weight$", r"model.layers.\1.mlp.gate_proj.weight"),
    (r"^model\.transformer\.blocks\.(\d+)\.up_proj\.weight$", r"model.layers.\1.mlp.up_proj.weight"),
    (r"^model\.transformer\.blocks\.(\d+)\.ff_out\.weight$", r"model.layers.\1.mlp.down_proj.weight"),
    (r"^model\.transformer\.blocks\.(\d+)\.attn_norm\.weight$", r"model.layers.\1.input_layernorm.weight"),
    (r"^model\.transformer\.blocks\.(\d+)\.ff_norm\.weight$", r"model.layers.\1.post_attention_layernorm.weight"),
]
_LLADA_RENAMES_C = [(re.compile(a), b) for a, b in _LLADA_RENAMES]


def stock_name(family: Family, name: str) -> str | None:
    """The stock class's name of checkpoint tensor ``name`` (None: a tensor the stock class has no
    place for, e.g. a rotary buffer some exports carry)."""
    if not family.renamed:
        return None if name.endswith("rotary_emb.inv_freq") else name
    for pattern, repl in _LLADA_RENAMES_C:
        if pattern.match(name):
            return pattern.sub(repl, name)
    return None


def _get(data: dict, *names, default=None):
    for n in names:
        if data.get(n) is not None:
            return data[n]
    return default


def _need(data: dict, path, *names):
    value = _get(data, *names)
    if value is None:
        raise ModelLoadError(f"{path}: config.json has no {' / '.join(names)}")
    return value


def stock_config(family: Family, data: dict, path) -> dict:
    """The stock class's config fields, read from the checkpoint's config.json (shapes are checked
    against the tensors later). Refuses switches the stock class cannot express."""
    if not family.renamed:
        act = data.get("hidden_act", "silu")
        if act != "silu":
            raise ModelLoadError(f"{path}: hidden_act {act!r} is not supported (silu only)")
        if data.get("use_sliding_window"):
            raise ModelLoadError(f"{path}: use_sliding_window is set; a diffusion model attends to the whole layout")
        out = dict(
            vocab_size=_need(data, path, "vocab_size"),
            hidden_size=_need(data, path, "hidden_size"),
            intermediate_size=_need(data, path, "intermediate_size"),
            num_hidden_layers=_need(data, path, "num_hidden_layers"),
            num_attention_heads=_need(data, path, "num_attention_heads"),
            num_key_value_heads=_get(data, "num_key_value_heads", "num_attention_heads"),
            rms_norm_eps=_get(data, "rms_norm_eps", default=1e-6),
            max_position_embeddings=_get(data, "max_position_embeddings", default=32768),
            tie_word_embeddings=bool(data.get("tie_word_embeddings", False)),
            rope_theta=float(_get(data, "rope_theta", default=10000.0)),
            rope_scaling=data.get("rope_scaling"),
        )
        return out
    # LLaDA (OLMo-style config).
    for flag, want in (("block_type", "llama"), ("layer_norm_type", "rms"), ("activation_type", "silu")):
        got = data.get(flag, want)
        if got != want:
            raise ModelLoadError(f"{path}: {flag} {got!r} is not supported ({want!r} only)")
    for flag in ("alibi", "include_bias", "include_qkv_bias", "attention_layer_norm", "input_emb_norm", "scale_logits",
                 "multi_query_attention"):
        if data.get(flag):
            raise ModelLoadError(f"{path}: {flag} is set, which a Llama model cannot express")
    if data.get("rope") is False:
        raise ModelLoadError(f"{path}: rope is off, which a Llama model cannot express")
    d = _need(data, path, "d_model", "hidden_size")
    heads = _need(data, path, "n_heads", "num_attention_heads")
    return dict(
        vocab_size=_need(data, path, "embedding_size", "vocab_size"),
        hidden_size=d,
        intermediate_size=_get(data, "mlp_hidden_size", "intermediate_size"),  # None: read from the tensors
        num_hidden_layers=_need(data, path, "n_layers", "num_hidden_layers"),
        num_attention_heads=heads,
        num_key_value_heads=_get(data, "n_kv_heads", "num_key_value_heads", default=heads),
        rms_norm_eps=_get(data, "rms_norm_eps", "layer_norm_eps", default=1e-5),
        max_position_embeddings=_get(data, "max_sequence_length", "max_position_embeddings", default=4096),
        tie_word_embeddings=bool(data.get("weight_tying", data.get("tie_word_embeddings", False))),
        rope_theta=float(_get(data, "rope_theta", default=10000.0)),
        rope_scaling=data.get("rope_scaling"),
    )
