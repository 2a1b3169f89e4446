"""Tiny random checkpoints of the open diffusion LM families, in each family's file layout.

Written from the facts in ../shared/open-dllms.md (config.json fields, tensor names, tokenizer
files with the family's special tokens at their real ids), no weights downloaded: the vocabulary
is a small byte-level BPE trained here, padded with filler entries up to the family's special ids,
and the model is 2 layers of a small hidden size (the embedding has the family's real row count).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from infill.model.tokenizer import SPLIT_PATTERN

CORPUS = [
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n        self.items.append(x)\n",
    "for i in range(10):\n    if i % 2 == 0:\n        print(i)\n",
    "import os\nimport sys\n\nx = {'a': 1, 'b': [1, 2, 3]}\n",
] * 4

# Qwen2's own special tokens from <|endoftext|> on (151643 ...), as in Qwen2.5's tokenizer.
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                 "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                 "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
                 "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"]


def bpe_tokenizer(specials: dict[int, str], normal_size: int | None = None) -> Tokenizer:
    """A byte-level BPE (Qwen2's split regex) whose vocabulary runs up to the lowest special id
    (filler entries past the trained merges), then the special tokens at their ids (gaps filled
    with reserved special tokens, as real vocabularies have)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False, special_tokens=[])
    tok.train_from_iterator(CORPUS, trainer=trainer)
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    first = min(specials) if normal_size is None else normal_size
    i = len(vocab)
    while len(vocab) < first:
        vocab[f"Ġfiller{i}"] = len(vocab)  # unreachable by the merges: never produced by encode
        i += 1
    added = []
    for j in range(first, max(specials) + 1):
        added.append({"id": j, "content": specials.get(j, f"<|reserved_{j}|>"), "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
    data["added_tokens"] = added
    out = Tokenizer.from_str(json.dumps(data))
    for a in added:
        assert out.token_to_id(a["content"]) == a["id"], a
    return out


def write_vocab_merges(tok: Tokenizer, directory: Path) -> None:
    """The slow-tokenizer layout (vocab.json, merges.txt, added tokens in tokenizer_config.json)."""
    data = json.loads(tok.to_str())
    (directory / "vocab.json").write_text(json.dumps(data["model"]["vocab"]))
    merges = data["model"]["merges"]
    lines = [" ".join(m) if isinstance(m, list) else m for m in merges]
    (directory / "merges.txt").write_text("#version: 0.2\n" + "\n".join(lines) + "\n")
    return {str(a["id"]): {"content": a["content"], "special": a["special"], "lstrip": False, "rstrip": False,
                           "normalized": False, "single_word": False} for a in data["added_tokens"]}


def qwen2_state(cfg: dict, tied: bool, seed: int, biases: bool = True) -> dict[str, torch.Tensor]:
    """A Qwen2 network's tensors, random (``biases=False``: a Llama network's)."""
    g = torch.Generator().manual_seed(seed)
    d, f, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    H, K = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = d // H

    def w(*shape, std=0.2):
        return torch.randn(*shape, generator=g) * std

    s = {"model.embed_tokens.weight": w(V, d, std=1.0), "model.norm.weight": 1 + w(d, std=0.1)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        s.update({
            p + "self_attn.q_proj.weight": w(H * hd, d), **({p + "self_attn.q_proj.bias": w(H * hd)} if biases else {}),
            p + "self_attn.k_proj.weight": w(K * hd, d), **({p + "self_attn.k_proj.bias": w(K * hd)} if biases else {}),
            p + "self_attn.v_proj.weight": w(K * hd, d), **({p + "self_attn.v_proj.bias": w(K * hd)} if biases else {}),
            p + "self_attn.o_proj.weight": w(d, H * hd),
            p + "mlp.gate_proj.weight": w(f, d), p + "mlp.up_proj.weight": w(f, d), p + "mlp.down_proj.weight": w(d, f),
            p + "input_layernorm.weight": 1 + w(d, std=0.1), p + "post_attention_layernorm.weight": 1 + w(d, std=0.1),
        })
    if not tied:
        s["lm_head.weight"] = w(V, d)
    return s


def llada_state(cfg: dict, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    d, f, V = cfg["d_model"], cfg["mlp_hidden_size"], cfg["embedding_size"]

    def w(*shape, std=0.2):
        return torch.randn(*shape, generator=g) * std

    s = {"model.transformer.wte.weight": w(V, d, std=1.0), "model.transformer.ln_f.weight": 1 + w(d, std=0.1),
         "model.transformer.ff_out.weight": w(V, d)}
    for i in range(cfg["n_layers"]):
        p = f"model.transformer.blocks.{i}."
        s.update({
            p + "q_proj.weight": w(d, d), p + "k_proj.weight": w(d, d), p + "v_proj.weight": w(d, d),
            p + "attn_out.weight": w(d, d), p + "ff_proj.weight": w(f, d), p + "up_proj.weight": w(f, d),
            p + "ff_out.weight": w(d, f), p + "attn_norm.weight": 1 + w(d, std=0.1), p + "ff_norm.weight": 1 + w(d, std=0.1),
        })
    return s


def save_sharded(state: dict[str, torch.Tensor], directory: Path, shards: int, dtype=torch.bfloat16) -> None:
    """model-0000i-of-0000n.safetensors and model.safetensors.index.json (or one model.safetensors)."""
    state = {k: v.to(dtype).contiguous() for k, v in state.items()}
    if shards == 1:
        save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})
        return
    names = sorted(state)
    weight_map, total = {}, 0
    for s in range(shards):
        part = names[s::shards]
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        save_file({n: state[n] for n in part}, str(directory / fname), metadata={"format": "pt"})
        for n in part:
            weight_map[n] = fname
            total += state[n].numel() * state[n].element_size()
    (directory / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))


SMALL = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)


def dream(directory: Path, variant: str = "dream", seed: int = 0, small_vocab: bool = False,
          tokenizer_files: str = "json") -> Path:
    """Dream-v0 / Dream-Coder-v0 / DreamOn-v0 / DiffuCoder: architectures ["DreamModel"],
    model_type "Dream", Qwen2 tensor names, mask 151666, bos/eos/pad 151643 (Dream-Coder's bos
    151665); DreamOn adds <|expand|> 151667, DiffuCoder <|dlm_pad|> 151667. ``small_vocab``: a
    config that declares other ids (a 512-row vocabulary, the specials from 400 on)."""
    directory.mkdir(parents=True, exist_ok=True)
    if small_vocab:
        base, V = 400, 512
        names = {base: "<|endoftext|>", base + 1: "<|beginoftext|>", base + 2: "<|mask|>"}
        if variant == "dreamon":
            names[base + 3] = "<|expand|>"
        eos, bos_coder, mask = base, base + 1, base + 2
    else:
        V = 152064
        names = {151643 + i: t for i, t in enumerate(QWEN_SPECIALS)}
        names.update({151665: "<|beginoftext|>", 151666: "<|mask|>"})
        if variant == "dreamon":
            names[151667] = "<|expand|>"
        if variant == "diffucoder":
            names[151667] = "<|dlm_pad|>"
        eos, bos_coder, mask = 151643, 151665, 151666
    bos = bos_coder if variant in ("dream-coder", "dreamon") else eos
    tok = bpe_tokenizer(names)
    cfg = {
        "architectures": ["DreamModel"], "model_type": "Dream",
        "auto_map": {"AutoConfig": "configuration_dream.DreamConfig", "AutoModel": "modeling_dream.DreamModel"},
        "vocab_size": V, **SMALL, "hidden_act": "silu", "max_position_embeddings": 32768 if variant != "dream" else 131072,
        "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_scaling": None, "tie_word_embeddings": False,
        "use_sliding_window": False, "sliding_window": None, "attention_dropout": 0.0, "use_cache": False,
        "mask_token_id": mask, "bos_token_id": bos, "eos_token_id": eos, "pad_token_id": eos,
        "torch_dtype": "bfloat16", "transformers_version": "4.46.2",
    }
    (directory / "config.json").write_text(json.dumps(cfg, indent=2))
    tconf = {"bos_token": names[bos], "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
             "mask_token": "<|mask|>", "model_max_length": 131072, "tokenizer_class": "DreamTokenizer"}
    if tokenizer_files == "json":
        tok.save(str(directory / "tokenizer.json"))
    else:
        tconf["added_tokens_decoder"] = write_vocab_merges(tok, directory)
    (directory / "tokenizer_config.json").write_text(json.dumps(tconf, indent=2))
    (directory / "generation_config.json").write_text(json.dumps({"bos_token_id": bos, "eos_token_id": eos}))
    save_sharded(qwen2_state(cfg, tied=False, seed=seed), directory, shards=2)
    return directory


def open_dcoder(directory: Path, seed: int = 1, mask: bool = True) -> Path:
    """Open-dCoder 0.5B: Qwen2ForCausalLM / qwen2 with Qwen2.5-Coder-0.5B's tied embeddings and
    151936 rows; the mask token <M> added at training (151665). ``mask=False``: plain causal
    Qwen2.5-Coder (no mask token anywhere)."""
    directory.mkdir(parents=True, exist_ok=True)
    names = {151643 + i: t for i, t in enumerate(QWEN_SPECIALS)}
    if mask:
        names[151665] = "<M>"
    tok = bpe_tokenizer(names)
    cfg = {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 151936,
        "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "hidden_act": "silu", "max_position_embeddings": 32768, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "tie_word_embeddings": True, "use_sliding_window": False, "sliding_window": 32768,
        "max_window_layers": 24, "bos_token_id": 151643, "eos_token_id": 151643, "torch_dtype": "bfloat16",
    }
    (directory / "config.json").write_text(json.dumps(cfg, indent=2))
    tok.save(str(directory / "tokenizer.json"))
    tconf = {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "bos_token": None}
    if mask:
        tconf["mask_token"] = "<M>"
    (directory / "tokenizer_config.json").write_text(json.dumps(tconf, indent=2))
    save_sharded(qwen2_state(cfg, tied=True, seed=seed), directory, shards=1)
    return directory


def llada(directory: Path, seed: int = 2) -> Path:
    """LLaDA-8B: LLaDAModelLM / llada, OLMo-style config and tensor names, 126464 rows, mask
    126336 (<|mdm_mask|>), EOS/pad 126081, BOS 126080, EoT 126348."""
    directory.mkdir(parents=True, exist_ok=True)
    names = {126080: "<|startoftext|>", 126081: "<|endoftext|>", 126336: "<|mdm_mask|>", 126346: "<|start_header_id|>",
             126347: "<|end_header_id|>", 126348: "<|eot_id|>"}
    tok = bpe_tokenizer(names)
    cfg = {
        "architectures": ["LLaDAModelLM"], "model_type": "llada",
        "auto_map": {"AutoConfig": "configuration_llada.LLaDAConfig", "AutoModel": "modeling_llada.LLaDAModelLM"},
        "d_model": 32, "n_heads": 4, "n_kv_heads": 4, "n_layers": 2, "mlp_hidden_size": 48, "mlp_ratio": 4,
        "vocab_size": 126464, "embedding_size": 126464, "max_sequence_length": 4096, "rope": True, "rope_theta": 500000.0,
        "rope_full_precision": True, "rms_norm_eps": 1e-5, "layer_norm_type": "rms", "activation_type": "silu",
        "block_type": "llama", "include_bias": False, "include_qkv_bias": False, "weight_tying": False, "alibi": False,
        "attention_layer_norm": False, "input_emb_norm": False, "scale_logits": False, "block_group_size": 1,
        "mask_token_id": 126336, "eos_token_id": 126081, "pad_token_id": 126081, "use_cache": False,
    }
    (directory / "config.json").write_text(json.dumps(cfg, indent=2))
    tok.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}, indent=2))
    save_sharded(llada_state(cfg, seed=seed), directory, shards=3)
    return directory


# A plain causal Llama (SmolLM2's layout, in small): specials after the normal vocabulary.
CAUSAL_SPECIALS = {400: "<|endoftext|>", 401: "<|im_start|>", 402: "<|im_end|>", 403: "<repo_name>"}
CAUSAL_LLAMA = dict(SMALL, vocab_size=416, max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0)


def llama_state(cfg: dict, tied: bool, seed: int) -> dict[str, torch.Tensor]:
    """A Llama network's tensors (no q/k/v biases), random."""
    return qwen2_state(cfg, tied, seed, biases=False)


def int8_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every matrix as int8 with its per-row ``<name>_scale`` (infill/model/hf/int8.py), the rest fp32."""
    from infill.model.hf import int8

    out = {}
    for k, v in state.items():
        if v.ndim == 2:
            out[k], out[k + int8.SCALE_SUFFIX] = int8.quantize(v)
        else:
            out[k] = v.float()
    return out


def on_grid(w: torch.Tensor, group: int = 32) -> torch.Tensor:
    """``w`` rounded to a 4-bit grid per group of ``group`` weights along a row, as llama.cpp's Q4_1
    stores it: each group's minimum and maximum are its codes 0 and 15."""
    n, k = w.shape
    g = w.float().view(n, k // group, group)
    lo, hi = g.amin(-1, keepdim=True), g.amax(-1, keepdim=True)
    step = (hi - lo) / 15
    return (torch.round((g - lo) / step) * step + lo).view(n, k)


def dequantized_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The float tensors an int8 state stands for."""
    from infill.model.hf import int8

    scales = {k[: -len(int8.SCALE_SUFFIX)]: v for k, v in state.items() if k.endswith(int8.SCALE_SUFFIX)}
    return {k: int8.dequantize(v, scales[k], torch.float32) if k in scales else v.float()
            for k, v in state.items() if not k.endswith(int8.SCALE_SUFFIX)}


def causal_llama(directory: Path, seed: int = 6, variant: str = "float", state: dict | None = None,
                 shape: dict | None = None) -> Path:
    """A plain LlamaForCausalLM checkpoint (no mask token anywhere): 2 layers of 32, a 416-row
    vocabulary (the tokenizer's 404, then padding), EOS = BOS = <|endoftext|> 400, fp32 weights.
    ``variant`` "int8": every matrix stored as int8 with its scale; ``state``: these tensors instead;
    ``shape``: these sizes instead of CAUSAL_LLAMA's."""
    directory.mkdir(parents=True, exist_ok=True)
    tok = bpe_tokenizer(CAUSAL_SPECIALS)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **(shape or CAUSAL_LLAMA), "hidden_act": "silu",
           "tie_word_embeddings": False, "bos_token_id": 400, "eos_token_id": 400, "torch_dtype": "float32"}
    (directory / "config.json").write_text(json.dumps(cfg, indent=2))
    tok.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "model_max_length": 2048}, indent=2))
    if state is None:
        state = llama_state(cfg, tied=False, seed=seed)
        if variant == "int8":
            state = int8_state(state)
    state = {k: v.contiguous() for k, v in state.items()}
    save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})
    return directory
