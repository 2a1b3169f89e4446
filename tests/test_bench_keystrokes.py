"""``infill bench lsp`` on the tiny random model: the real server, a few keystrokes (the numbers mean
nothing; the shape of the summary and what the server saw do)."""

import json
import random

from infill import cli
from infill.bench import keystrokes
from infill.protocol import FillRequest, Hole, SamplingOptions
from infill.model.tokenizer import Tokenizer

FAST = dict(keystrokes=3, warmup=1, context_tokens=200, max_tokens=8, steps=2, device="cpu", threads=1, precision="fp32",
            seed=0)


def test_keystrokes_retype_the_original_text(tiny_model_dir):
    tok = Tokenizer.from_file(tiny_model_dir / "tokenizer.json")
    text = keystrokes.load_sources(["argparse.py"])[0]
    doc = keystrokes.build_document("file:///x.py", "argparse.py", text, tok, keystrokes=40, context_tokens=300,
                                    rng=random.Random(1))
    assert len(doc.keys) == 40 and all(len(k) == 1 or k[0] == "\n" and not k[1:].strip() for k in doc.keys)
    assert doc.text[doc.cursor] == "\n" and doc.text[: doc.cursor].split("\n")[-1].strip() == ""  # an empty indented line
    suffix = doc.text[doc.cursor:]
    for _ in doc.keys:
        change = doc.type_next()
        assert change.content_changes[0].range.start == change.content_changes[0].range.end
    assert doc.text[: doc.cursor] in text and doc.text.endswith(suffix)  # re-typed the original file
    assert 250 <= doc.context_tokens <= 400


def test_with_no_context_budget_a_document_is_the_whole_file(tiny_model_dir):
    tok = Tokenizer.from_file(tiny_model_dir / "tokenizer.json")
    text = keystrokes.load_sources(["argparse.py"])[0]
    doc = keystrokes.build_document("file:///x.py", "argparse.py", text, tok, keystrokes=40, context_tokens=0,
                                    rng=random.Random(1))
    start = doc.cursor
    for _ in doc.keys:
        doc.type_next()
    assert doc.text.startswith(text[:start]) and doc.text.endswith(text[-2000:])  # the file's start and end
    assert doc.context_tokens > 10000


def p_latencies(out, documents: int) -> list[float]:
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return [r["latency_ms"] for r in rows if r["documents"] == documents]


def test_bench_lsp_one_and_two_documents(tiny_model_dir, tiny_engine, tmp_path):
    out = tmp_path / "run"
    # Unconstrained: the tiny random model's fills seldom parse, and the server never shows one that
    # does not, while the sync check below reads the completion item the server answers with.
    summary = keystrokes.run_keystrokes(tiny_model_dir, documents=[1, 2], out_dir=out, constrained=False, **FAST)

    assert [p["documents"] for p in summary["phases"]] == [1, 2]
    for p in summary["phases"]:
        assert p["requests"] == 3 * p["documents"] and p["errors"] == 0
        assert 0 < p["min_ms"] <= p["p50_ms"] <= p["p95_ms"] <= p["max_ms"]
        assert 0.0 <= p["empty_share"] <= 1.0
        assert p["model_runs"] == sum(r >= keystrokes.MODEL_RAN_MS for r in p_latencies(out, p["documents"]))
        assert p["model_p50_ms"] is None if not p["model_runs"] else p["model_p50_ms"] >= keystrokes.MODEL_RAN_MS
        assert len(p["context_tokens"]) == p["documents"]
        assert p["sync_ok"] == p["sync_checked"] == p["documents"]  # the server saw the typed text
    assert summary["server_warnings"] == 0, summary["server_messages"]
    assert "python" in summary["languages"]  # the infill/languages notification the server sends once loaded
    load = summary["load"]
    assert load["load_ms"] > 0 and "loaded tiny-test" in load["message"] and load["first_request_ms"] > 0
    assert set(summary["targets"]) == {"one_doc_p50_ms", "one_doc_p95_ms", "2_docs_p50_over_one_doc",
                                       "2_docs_p95_over_one_doc", "2_docs_p50_ms", "2_docs_p95_ms"}
    assert summary["targets"]["one_doc_p50_ms"]["target"] == "<= 150"
    assert summary["settings"]["initialization_options"]["debounceMs"] == 0
    assert summary["machine"]["cpu_count"] and summary["model"] == "tiny-test"

    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["phases"] == summary["phases"] and on_disk["targets"] == summary["targets"]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 3 + 6

    # The server saw the typed text: its last answer in the one-document phase is the engine's fill there.
    tok = Tokenizer.from_file(tiny_model_dir / "tokenizer.json")
    doc = keystrokes.make_documents(1, 0, tok, keystrokes=1 + 1 + 3, context_tokens=200, seed=0)[0]
    for _ in range(5):
        doc.type_next()
    request = FillRequest(text=doc.text, holes=[Hole(doc.cursor, doc.cursor, 8)], language="python",
                          options=SamplingOptions(steps=2, constrained=False), path=doc.uri)
    expected = tiny_engine.fill(request).fills[0].text
    last = [r for r in records if r["documents"] == 1][-1]
    assert last["fill"] == (expected if expected.strip() else "")


def test_cli_bench_lsp(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "cli"
    code = cli.main(["bench", "lsp", "--model", str(tiny_model_dir), "--device", "cpu", "--threads", "1",
                     "--documents", "1", "--keystrokes", "2", "--warmup", "0", "--context-tokens", "150",
                     "--max-tokens", "4", "--steps", "1", "--out", str(out), "-q"])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["phases"][0]["requests"] == 2 and summary["settings"]["threads"] == 1
    assert "keystroke -> inlineCompletion latency" in capsys.readouterr().out
