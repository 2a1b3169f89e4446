"""Byte-level BPE tokenizer for code, trained and loaded with the ``tokenizers`` library.

What it does:

- trains a byte-level BPE whose pre-tokenizer keeps runs of spaces together (a Qwen2-style
  split regex, then ``ByteLevel(use_regex=False)``), so indentation costs one or two
  tokens; all 256 byte symbols are in the alphabet, so any text encodes;
- reserves the special tokens ``<|pad|>`` = 0, ``<|mask|>`` = 1, ``<|eos|>`` = 2;
- round-trips text exactly: no normaliser, no prefix space, ``decode(encode(s)) == s``
  for every ``str`` (whitespace, ``\\r\\n``, tabs, non-ASCII included). The literal text
  ``<|mask|>`` in a document is encoded as ordinary bytes, never as the special token;
- saves and loads a single ``tokenizer.json``.

What it does not do: add special tokens when encoding (callers place pad/mask/eos), chunk
or pad sequences, or know anything about the model.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

from tokenizers import Regex, decoders, models, pre_tokenizers, trainers
from tokenizers import Tokenizer as _HFTokenizer

from infill.errors import ModelLoadError

log = logging.getLogger(__name__)

PAD = "<|pad|>"
MASK = "<|mask|>"
EOS = "<|eos|>"
SPECIAL_TOKENS = (PAD, MASK, EOS)  # ids 0, 1, 2, in this order

# Qwen2's split regex: contractions, words with one leading non-letter, single digits,
# punctuation runs, newlines with their leading whitespace, and whitespace runs (all but
# the last space before a word, which joins the word: "        x" -> 7 spaces + " x").
SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable-unicode symbol -> byte table (what ByteLevel uses)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


_BYTE_DECODER = _byte_decoder()


def _configure(tok: _HFTokenizer) -> _HFTokenizer:
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = None
    # Special-token strings that occur in source text stay ordinary text.
    tok.encode_special_tokens = True
    return tok


class Tokenizer:
    """A thin wrapper around ``tokenizers.Tokenizer`` with fixed special ids."""

    def __init__(self, tok: _HFTokenizer) -> None:
        self._tok = _configure(tok)
        for i, name in enumerate(SPECIAL_TOKENS):
            if tok.token_to_id(name) != i:
                raise ModelLoadError(f"tokenizer: special token {name} must have id {i}, has {tok.token_to_id(name)}")
        self.pad_id, self.mask_id, self.eos_id = 0, 1, 2
        self.vocab_size: int = tok.get_vocab_size(with_added_tokens=True)
        self._special = set(range(len(SPECIAL_TOKENS)))

    # -------------------------------------------------------------- files

    @classmethod
    def from_file(cls, path: str | Path) -> Tokenizer:
        """Load a ``tokenizer.json`` (or a directory holding one)."""
        path = Path(path)
        if path.is_dir():
            path = path / "tokenizer.json"
        try:
            tok = _HFTokenizer.from_file(str(path))
        except FileNotFoundError as e:
            raise ModelLoadError(f"tokenizer file not found: {path}") from e
        except Exception as e:  # the Rust side raises bare Exception on parse errors
            if not path.is_file():
                raise ModelLoadError(f"tokenizer file not found: {path}") from e
            raise ModelLoadError(f"tokenizer file is corrupt: {path}: {e}") from e
        return cls(tok)

    @classmethod
    def from_str(cls, text: str) -> Tokenizer:
        """Load from the JSON text of a ``tokenizer.json``."""
        try:
            return cls(_HFTokenizer.from_str(text))
        except ModelLoadError:
            raise
        except Exception as e:
            raise ModelLoadError(f"tokenizer JSON is corrupt: {e}") from e

    def save(self, path: str | Path) -> None:
        """Write one ``tokenizer.json`` (a directory gets ``tokenizer.json`` inside)."""
        path = Path(path)
        if path.is_dir():
            path = path / "tokenizer.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_str(), encoding="utf-8")
        tmp.replace(path)

    def to_str(self) -> str:
        return self._tok.to_str(pretty=False)

    # -------------------------------------------------------------- encode / decode

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; no special tokens added."""
        return self._tok.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``, skipping pad/mask/eos. Never raises on a partial UTF-8 sequence:
        incomplete characters become U+FFFD."""
        ids = [int(i) for i in ids if int(i) not in self._special]
        return self._tok.decode(ids, skip_special_tokens=True)

    def token_bytes(self, token_id: int) -> bytes:
        """The exact bytes one token stands for (``b""`` for special tokens)."""
        if token_id in self._special:
            return b""
        piece = self._tok.id_to_token(int(token_id))
        if piece is None:
            raise IndexError(f"token id {token_id} out of range (vocab {self.vocab_size})")
        return bytes(_BYTE_DECODER[c] for c in piece)

    def token_text(self, token_id: int) -> str:
        """The string one token decodes to (``""`` for special tokens; U+FFFD for a token
        that is only part of a UTF-8 character)."""
        return self.token_bytes(token_id).decode("utf-8", errors="replace")

    def __len__(self) -> int:
        return self.vocab_size


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int = 8192,
    *,
    min_frequency: int = 2,
    max_token_length: int | None = 32,
    show_progress: bool = False,
) -> Tokenizer:
    """Train a byte-level BPE on ``texts`` with ``<|pad|>``=0, ``<|mask|>``=1, ``<|eos|>``=2."""
    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must be at least {256 + len(SPECIAL_TOKENS)}, got {vocab_size}")
    tok = _configure(_HFTokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False)))
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        max_token_length=max_token_length,
        show_progress=show_progress,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    log.info("trained tokenizer: %d tokens", tok.get_vocab_size())
    return Tokenizer(tok)


def tokens_per_byte(tokenizer: Tokenizer, texts: Iterable[str], batch: int = 256) -> float:
    """Mean number of tokens per UTF-8 byte over ``texts`` (lower is better compression)."""
    n_tokens = n_bytes = 0
    chunk: list[str] = []

    def flush() -> None:
        nonlocal n_tokens, n_bytes
        n_tokens += sum(len(ids) for ids in tokenizer.encode_batch(chunk))
        n_bytes += sum(len(t.encode("utf-8")) for t in chunk)
        chunk.clear()

    for t in texts:
        chunk.append(t)
        if len(chunk) >= batch:
            flush()
    if chunk:
        flush()
    return n_tokens / max(n_bytes, 1)

