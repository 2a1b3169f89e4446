"""Snippets laid out as tokens before a document (infill/text/snippets.py) and token healing's rule
(infill/text/healing.py): pure functions the engine and the window adapter's training share."""

from infill.text import healing, snippets


def encode(text: str) -> list[int]:  # one token a character: room counts characters
    return [ord(c) for c in text]


def test_the_lines_further_down_start_after_the_line_the_hole_is_on():
    assert snippets.further_down(" + b)\nz = 3\nw = 4\nv = 5\n", 2) == "z = 3\nw = 4\n"
    assert snippets.further_down("\nz = 3\n", 5) == "z = 3\n"  # a hole at a line's end: the next line on
    assert snippets.further_down("tail without a line break", 3) == ""
    assert snippets.further_down("\nz = 3\n", 0) == ""
    assert snippets.further_down_name("src/app.py") == "app.py (further down)"
    assert snippets.further_down_name(None) == "this file (further down)"


def test_a_snippet_is_cut_to_its_first_whole_lines_that_fit_and_the_last_is_kept_first():
    text = "".join(f"line {i}\n" for i in range(10))
    piece = snippets.first_lines(encode, "a.py", text, "#", 30)
    assert "".join(map(chr, piece)) == "# a.py\nline 0\nline 1\nline 2\n\n"
    assert snippets.first_lines(encode, "a.py", text, "#", 8) == []  # not even its header and one line
    pieces = [("far.py", "x = 1\n" * 9), ("near.py", "y = 2\n")]
    assert "".join(map(chr, snippets.lay_out(encode, pieces, "#", 40))) == "# far.py\nx = 1\nx = 1\n\n# near.py\ny = 2\n\n"
    assert "".join(map(chr, snippets.lay_out(encode, pieces, "#", 30))) == "# near.py\ny = 2\n\n"  # the best (last) first


def test_healing_takes_back_whitespace_and_a_word_or_operator_cut_at_the_hole():
    assert healing.heals(b" ") and healing.heals(b"\n") and healing.heals(b"\n    ")
    assert healing.heals(b"_negativ") and healing.heals(b" retur")
    assert not healing.heals(b"_negativ", "e")  # the word goes on after the hole: not cut
    assert healing.heals(b":") and not healing.heals(b":", ":")
    assert not healing.heals(b"(") and not healing.heals(b"") and not healing.heals(b" (x")


def test_healing_takes_a_word_split_over_tokens_back_as_far_as_some_token_starts_with_it():
    vocab = sorted((b, i) for i, b in enumerate([b" el", b"s", b" else", b" elsewhere", b"\n   ", b"::", b" x", b"_", b"neg"]))
    starts = lambda head: healing.starts_some(vocab, head)  # noqa: E731
    assert healing.heal_count([b"\n   ", b" el", b"s"], "\n", starts) == 2  # " els": " else" starts with it
    assert healing.heal_count([b"\n   ", b" el", b"s"], "e", starts) == 0  # the word goes on after the hole
    assert healing.heal_count([b" x", b"_", b"neg"], "\n", starts) == 1  # no token starts with "_neg"
    assert healing.heal_count([b"\n   ", b" "], "", starts) == 1  # whitespace: its own token only
    assert healing.heal_count([b" x", b"=", b"="], "", lambda head: True) == 1  # an operator: its last token only
    assert healing.heal_count([b"a", b"b", b"c", b"d", b"e", b"f"], "", lambda head: True) == healing.MOST
    assert not healing.starts_some(vocab, b" elz") and healing.starts_some(vocab, b" elsew")
