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


def test_the_simulated_editors_ask_what_the_language_server_asks_at_the_cursor():
    from infill.bench.serve import LSP_OPTIONS
    from infill.lsp.options import Options
    from infill.lsp.server import InfillServer

    server = InfillServer()
    server.options = Options()
    lsp = server.sampling(cursor=True)
    assert (LSP_OPTIONS.candidates, LSP_OPTIONS.retry, LSP_OPTIONS.steps, LSP_OPTIONS.threshold) == \
        (lsp.candidates, lsp.retry, lsp.steps, lsp.threshold)
