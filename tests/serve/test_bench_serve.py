"""`infill bench serve` end to end, tiny: a server subprocess with the tiny model, two phases."""

from __future__ import annotations

import argparse
import json

from infill.bench import serve as bench


def test_bench_serve_smoke(tiny_model_dir, tmp_path):
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    bench.add_arguments(parser)
    args = parser.parse_args(["--model", str(tiny_model_dir), "--editors", "1,3", "--duration", "1.5",
                              "--interval-ms", "50", "--context-tokens", "128", "--max-tokens", "8",
                              "--out", str(tmp_path), "--no-plot"])
    summary = bench.run(args)
    phases = summary["phases"]
    assert [p["editors"] for p in phases] == [1, 3]
    assert all(p["requests"] > 0 and p["errors"] == 0 and p["p50_ms"] > 0 for p in phases)
    assert phases[1]["mean_batch_requests"] > 1  # three editors shared model calls
    assert json.loads((tmp_path / "summary.json").read_text())["benchmark"] == "serve"
    # the tiny model declares no floor: every result says it did not stop under one
    records = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert summary["settings"]["min_score"] is None and all(p["below_floor"] == 0 for p in phases)
    assert records and all(r["below_floor"] is False for r in records if r["ok"])


def test_the_simulated_editors_ask_what_the_language_server_asks_at_the_cursor():
    """Every option, the model's floor included (config.json's min_score: a fill under it stops)."""
    from infill.bench.serve import lsp_options
    from infill.lsp.options import Options
    from infill.lsp.server import InfillServer
    from infill.model.declared import bundled_model_dir, declared_min_score

    server = InfillServer()
    server.options = Options()
    server.model_min_score = declared_min_score(bundled_model_dir())
    assert server.model_min_score is not None
    assert lsp_options(bundled_model_dir()) == server.sampling(cursor=True)
