"""Byte-level BPE tokenizer: exact round-trip, special ids, indentation, save/load."""

import sysconfig
from pathlib import Path

import pytest

from infill.errors import ModelLoadError
from infill.model.tokenizer import EOS, MASK, PAD, Tokenizer, tokens_per_byte, train_tokenizer

STDLIB = Path(sysconfig.get_paths()["stdlib"])
MODULES = ["textwrap.py", "dataclasses.py", "argparse.py", "json/decoder.py", "contextlib.py"]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    texts = [(STDLIB / m).read_text(encoding="utf-8") for m in MODULES]
    return train_tokenizer(texts, vocab_size=512)


TRICKY = [
    "",
    "\n",
    " ",
    "        ",
    "\t",
    "x",
    " leading space",
    "trailing spaces   ",
    "trailing newlines\n\n\n",
    "def f(x):\n    return x\n",
    "class A:\n\tdef g(self):\n\t\tpass\n",
    "a\r\nb\r\n\r\n",
    "\r",
    "mixed \t \t indentation\n  \n\t\n",
    "\n\n\n\n    \n\n",
    "héllo wörld",
    "emoji 🎉🐍 and CJK 中文字符 and ünïcödé",
    "zero\u200bwidth\u00a0nbsp",
    "combining e\u0301 and \U0001f468\u200d\U0001f469\u200d\U0001f467",
    "<|mask|><|pad|><|eos|> literal specials",
    "x = '<|mask|>'\n",
    "\x00\x01\x7f control",
    "s = '''\n    multi\n'''\n",
    "1234567890 3.14e-10 0xFF",
    "           if x:\n                pass\n",
]


@pytest.mark.parametrize("text", TRICKY)
def test_round_trip_exact(tok: Tokenizer, text: str) -> None:
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert all(i > 2 for i in ids), "special ids must never come from text"
    if text.isascii():
        assert "".join(tok.token_text(i) for i in ids) == text
    assert b"".join(tok.token_bytes(i) for i in ids) == text.encode("utf-8")


def test_round_trip_real_source(tok: Tokenizer) -> None:
    text = (STDLIB / "inspect.py").read_text(encoding="utf-8")  # not in the training set
    assert tok.decode(tok.encode(text)) == text
    batch = tok.encode_batch([text[:500], text[500:1000]])
    assert [tok.decode(b) for b in batch] == [text[:500], text[500:1000]]


def test_special_ids(tok: Tokenizer) -> None:
    assert (tok.pad_id, tok.mask_id, tok.eos_id) == (0, 1, 2)
    assert tok._tok.token_to_id(PAD) == 0
    assert tok._tok.token_to_id(MASK) == 1
    assert tok._tok.token_to_id(EOS) == 2
    assert tok.vocab_size == 512
    ids = tok.encode("x = 1")
    assert tok.decode([0, 1, *ids, 2, 0]) == "x = 1"
    assert tok.token_text(1) == ""


def test_indentation_is_compact(tok: Tokenizer) -> None:
    assert len(tok.encode("        ")) <= 2
    assert len(tok.encode("    ")) <= 2
    # the indentation run before a word stays a few tokens
    assert len(tok.encode("        return")) <= 4


def test_partial_utf8_slice_does_not_raise(tok: Tokenizer) -> None:
    ids = tok.encode("🐍")
    assert len(ids) > 1
    out = tok.decode(ids[:1])
    assert "\ufffd" in out
    assert tok.token_text(ids[0]) == "\ufffd"


def test_save_load_identity(tok: Tokenizer, tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    tok.save(path)
    again = Tokenizer.from_file(path)
    assert again.vocab_size == tok.vocab_size
    for text in TRICKY:
        assert again.encode(text) == tok.encode(text)
    assert Tokenizer.from_file(tmp_path).to_str() == tok.to_str()  # a directory works too


def test_missing_and_corrupt_file(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError):
        Tokenizer.from_file(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelLoadError):
        Tokenizer.from_file(bad)
    bad.write_text('{"version": "1.0"}', encoding="utf-8")
    with pytest.raises(ModelLoadError):
        Tokenizer.from_file(bad)


def test_tokens_per_byte(tok: Tokenizer) -> None:
    text = (STDLIB / "inspect.py").read_text(encoding="utf-8")
    assert 0.1 < tokens_per_byte(tok, [text]) < 1.0
