"""A checkpoint's own tokenizer behind our Tokenizer protocol (infill/model/seam.py).

Read from the checkpoint directory: ``tokenizer.json`` where there is one, else ``vocab.json`` +
``merges.txt`` (a byte-level BPE with Qwen2's split regex) with the added tokens of
``tokenizer_config.json`` (``added_tokens_decoder``) and ``added_tokens.json``. Special tokens are
looked up by the names ``tokenizer_config.json`` / ``special_tokens_map.json`` give them.

Text is encoded with no special tokens added, and special-token text inside a document stays
ordinary text (``encode_special_tokens``). ``token_bytes`` gives a token's exact bytes (byte-level
BPE; a byte-fallback/metaspace vocabulary is read as ``<0xNN>`` and ``▁``); special tokens are
b"". ``decode`` joins token bytes, so it agrees with ``token_bytes`` exactly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from tokenizers import Regex, decoders, models, pre_tokenizers
from tokenizers import Tokenizer as _HFTokenizer

from infill.errors import ModelLoadError
from infill.model.tokenizer import _BYTE_DECODER, SPLIT_PATTERN


def _read_json(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelLoadError(f"{path}: unreadable ({e})") from None
    return data if isinstance(data, dict) else {}


def _content(value) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def special_token_names(directory: Path) -> dict[str, str]:
    """The named special tokens (bos, eos, pad, mask, ...: their text) of the tokenizer's config files."""
    out: dict[str, str] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        data = _read_json(directory / name)
        for key, value in data.items():
            if key.endswith("_token") and _content(value) is not None:
                out.setdefault(key[: -len("_token")], _content(value))
    return out


def _from_vocab_merges(directory: Path) -> _HFTokenizer:
    vocab, merges = directory / "vocab.json", directory / "merges.txt"
    try:
        model = models.BPE.from_file(str(vocab), str(merges))
    except Exception as e:  # the Rust side raises bare Exception
        raise ModelLoadError(f"{directory}: unreadable vocab.json/merges.txt ({e})") from None
    tok = _HFTokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    added: dict[int, tuple[str, bool]] = {}
    for key, value in _read_json(directory / "tokenizer_config.json").get("added_tokens_decoder", {}).items():
        if _content(value) is not None and str(key).isdigit():
            added[int(key)] = (_content(value), bool(value.get("special", True)) if isinstance(value, dict) else True)
    for text, i in _read_json(directory / "added_tokens.json").items():
        if isinstance(i, int):
            added.setdefault(i, (text, True))
    from tokenizers import AddedToken

    for i in sorted(added):  # added in id order, so they take their ids
        text, special = added[i]
        if tok.token_to_id(text) is None:
            (tok.add_special_tokens if special else tok.add_tokens)([AddedToken(text, special=special, normalized=False)])
        if tok.token_to_id(text) != i:
            raise ModelLoadError(f"{directory}: added token {text!r} should have id {i}, gets {tok.token_to_id(text)} "
                                 "(vocab.json and the added tokens disagree)")
    return tok


def load_hf_tokenizer(directory: Path) -> _HFTokenizer:
    """The checkpoint's tokenizer, or ModelLoadError naming what is missing."""
    path = directory / "tokenizer.json"
    if path.is_file():
        try:
            return _HFTokenizer.from_file(str(path))
        except Exception as e:
            raise ModelLoadError(f"{path}: corrupt tokenizer ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    if (directory / "vocab.json").is_file() and (directory / "merges.txt").is_file():
        return _from_vocab_merges(directory)
    raise ModelLoadError(f"{directory}: no tokenizer (neither tokenizer.json nor vocab.json + merges.txt)")


class HFTokenizer:
    """Our Tokenizer protocol over a ``tokenizers.Tokenizer`` with the model's special ids."""

    def __init__(self, tok: _HFTokenizer, pad_id: int, mask_id: int, eos_id: int):
        self._tok = tok
        tok.encode_special_tokens = True  # "<|endoftext|>" typed in a file is text, not the token
        self.pad_id, self.mask_id, self.eos_id = pad_id, mask_id, eos_id
        vocab = tok.get_vocab(with_added_tokens=True)
        self.vocab_size: int = max(vocab.values()) + 1 if vocab else 0  # ids may have gaps: the highest counts
        self._added = {i: t for i, t in tok.get_added_tokens_decoder().items()}
        self.special_ids: frozenset[int] = frozenset(i for i, t in self._added.items() if t.special) | {pad_id, mask_id, eos_id}
        decoder = tok.decoder
        self._byte_level = decoder is None or "ByteLevel" in type(decoder).__name__ or "ByteLevel" in repr(decoder)
        self._bytes: dict[int, bytes] = {}

    def id_of(self, text: str) -> int | None:
        return self._tok.token_to_id(text)

    def text_of(self, token_id: int) -> str | None:
        return self._tok.id_to_token(int(token_id))

    def is_added(self, token_id: int) -> bool:
        return int(token_id) in self._added

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]

    def token_bytes(self, token_id: int) -> bytes:
        b = self._bytes.get(token_id)
        if b is not None:
            return b
        t = int(token_id)
        if t in self.special_ids:
            b = b""
        elif t in self._added:
            b = self._added[t].content.encode("utf-8")
        else:
            piece = self._tok.id_to_token(t)
            if piece is None:
                raise IndexError(f"token id {t} out of range (vocab {self.vocab_size})")
            if self._byte_level and all(c in _BYTE_DECODER for c in piece):
                b = bytes(_BYTE_DECODER[c] for c in piece)
            elif len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
                b = bytes([int(piece[3:5], 16)])
            else:
                b = piece.replace("\u2581", " ").encode("utf-8")
        self._bytes[token_id] = b
        return b

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``, special tokens (and ids outside the vocabulary) skipped; never raises
        on a partial UTF-8 sequence (U+FFFD)."""
        out = []
        for i in ids:
            i = int(i)
            if 0 <= i < self.vocab_size and i not in self.special_ids:
                try:
                    out.append(self.token_bytes(i))
                except IndexError:
                    pass
        return b"".join(out).decode("utf-8", "replace")

    def __len__(self) -> int:
        return self.vocab_size
