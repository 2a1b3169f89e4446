"""The speed benchmark on a tiny random engine, at tiny sizes (the numbers mean nothing; the shape does)."""

import argparse
import json
import math

import numpy as np
import pytest

from infill.bench import floor, speed
from infill.errors import InputError
from infill.model.network import ModelConfig



pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py: with two threads a busy 2-core
# machine turns 3 s of tiny fills into 40 s of spinning


TINY = dict(contexts=[64, 300], windows=[8, 16], repeats=2, warmup=1, sweep_window=16, sweep_context=64,
            batch_sizes=[1, 2], concurrency=[1, 2], thresholds=[0.9])


@pytest.mark.parametrize("values", [[3.0], [1.0, 2.0], [5.0, 1.0, 4.0, 2.0, 3.0], list(np.random.default_rng(0).random(37))])
@pytest.mark.parametrize("q", [0, 5, 50, 95, 100])
def test_percentile_matches_numpy_linear(values, q):
    assert speed.percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_by_hand_and_errors():
    assert speed.percentile([10, 20, 30, 40], 50) == 25
    assert speed.percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], 95) == pytest.approx(10.5)
    with pytest.raises(ValueError):
        speed.percentile([], 50)
    with pytest.raises(ValueError):
        speed.percentile([1.0], 101)


def test_flops_count_matmuls_and_attention():
    cfg = ModelConfig(vocab_size=64, d_model=8, n_layers=1, n_heads=2, d_ff=16)
    body = 4 * 8 * 8 + 3 * 8 * 16
    context = 2 * body * 10 + 2 * 10 ** 2 * 8
    step = 2 * (body + 64 * 8) * 4 + 4 * 4 * (10 + 4) * 8
    assert floor.fill_flops(cfg, 10, 4, 1, 3) == context + 3 * step
    assert floor.fill_flops(cfg, 10, 4, 2, 3) == context + 6 * step


def test_requests_are_cut_from_real_source_with_exact_context(tiny_engine):
    view = speed.engine_for_context(tiny_engine, 100)
    assert view.budget() == 100 and view.model is tiny_engine.model
    requests = speed.make_requests(view, speed.load_sources(), 4, 16, speed.SamplingOptions(), seed=3)
    assert len({(r.text, r.holes[0].start) for r in requests}) == 4
    for r in requests:
        hole = r.holes[0]
        line = r.text[hole.start:hole.end]
        assert line.strip() and "\n" not in line and hole.max_tokens == 16
        assert r.text[:hole.start].rsplit("\n", 1)[-1].strip() == ""  # the hole starts at the indentation
        assert sum(len(s) for s in view.prepare(r).segments) == 100
    again = speed.make_requests(view, speed.load_sources(), 4, 16, speed.SamplingOptions(), seed=3)
    assert again == requests


def test_quick_run_writes_every_section_json_and_plots(tiny_engine, tmp_path):
    quality = tmp_path / "q"
    quality.mkdir()
    for steps, p in [(4, 0.25), (16, 0.5)]:
        d = quality / f"s{steps}"
        d.mkdir()
        (d / "summary.json").write_text(json.dumps({
            "benchmark": "single-line", "model": "tiny-test", "metrics": {"pass@1": p},
            "settings": {"max_tokens": 16, "options": {"steps": steps, "threshold": None, "candidates": 1}}}))
    summary = speed.run_speed(tiny_engine, quick=True, out_dir=tmp_path / "out", progress=False,
                              quality_summaries=[quality / "s4", quality / "s16" / "summary.json"],
                              gpu={"name": "fake", "bf16_matmul_flops": 1e12, "copy_bytes_per_s": 1e11}, **TINY)
    out = tmp_path / "out"
    written = json.loads((out / "summary.json").read_text())
    assert written["rows"] == json.loads(json.dumps(summary["rows"]))
    for key in ("machine", "settings", "model_config", "engine_config", "notes", "targets", "device", "gpu"):
        assert key in written
    assert "git_commit" in written["machine"] and written["settings"]["repeats"] == 2
    sections = {r["section"] for r in written["rows"]}
    assert sections == set(speed.SECTIONS)
    grid = [r for r in written["rows"] if r["section"] == "grid"]
    assert {(r["context"], r["window"]) for r in grid} == {(64, 8), (64, 16), (300, 8), (300, 16)}
    for r in written["rows"]:
        assert r["runs"] == 2 and 0 < r["p50_ms"] <= r["p95_ms"]
        assert r["slots_per_s"] > 0 and r["tokens_per_s"] >= 0 and r["floor_ms"] > 0 and r["floor_bw_ms"] > 0
    assert all(r["mean_context_tokens"] == r["context"] for r in grid)
    assert any("300 exceeds" in n for n in written["notes"])  # the tiny model was trained on 256
    steps = sorted(r["mean_steps"] for r in written["rows"] if r["section"] == "steps")
    # A known indentation may be committed before the first step (engine.commit_leads): one slot fewer;
    # a row the constraint holds back takes up to a quarter more (Schedule.overrun).
    assert all(want - 1 <= got <= math.ceil(want * 1.25) for got, want in zip(steps, [2, 4, 8, 16])) and len(steps) == 4
    decoding = {r["label"]: r for r in written["rows"] if r["section"] == "decoding"}
    one = next(r for r in decoding.values() if r["schedule"] == "one-per-step")
    assert 15 <= one["mean_steps"] <= 16 and one["speedup_latency"] == 1.0
    assert 2 <= decoding["8/step"]["mean_steps"] <= 3
    assert [r["constrained"] for r in written["rows"] if r["section"] == "constrained"] == [False, True]
    batch = [r for r in written["rows"] if r["section"] == "batch"]
    assert [r["batch"] for r in batch] == [1, 2]
    conc = [r for r in written["rows"] if r["section"] == "concurrency"]
    assert [r["threads"] for r in conc] == [1, 2] and all(r["call_p50_ms"] > 0 for r in conc)
    frontier = [r for r in written["rows"] if r["section"] == "frontier"]
    assert [r["pass@1"] for r in frontier] == [0.25, 0.5]
    # each run's own options, a constrained fill's retry round included (the random model's fills are often invalid)
    few, many = (r["mean_steps"] for r in frontier)
    assert 4 <= few < many and many >= 15
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2 * len(written["rows"])
    for name in ("tokens_per_s_vs_window.png", "latency_vs_steps.png", "frontier.png", "quality_vs_steps.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and name in written["plots"]


def test_command_line_reaches_the_run(tiny_engine, tmp_path, capsys):
    parser = argparse.ArgumentParser()
    speed.add_arguments(parser)
    args = parser.parse_args(["--quick", "--out", str(tmp_path), "--sections", "grid,steps", "--contexts", "64",
                              "--windows", "8", "--sweep-window", "8", "--sweep-context", "64", "--repeats", "2",
                              "--no-plots"])
    assert speed.main(args, tiny_engine) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["settings"]["sections"] == ["grid", "steps"] and summary["settings"]["quick"]
    assert not list(tmp_path.glob("*.png"))
    assert "steps sweep" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        parser.parse_args(["--sections", "grid,nonsense"])


def test_bad_settings_are_input_errors(tiny_engine, tmp_path):
    with pytest.raises(InputError):
        speed.run_speed(tiny_engine, sections=["warp"], out_dir=tmp_path, progress=False)
    with pytest.raises(InputError):
        speed.run_speed(tiny_engine, quick=True, repeats=0, out_dir=tmp_path, progress=False)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(InputError):
        speed.run_speed(tiny_engine, quick=True, quality_summaries=[tmp_path / "bad.json"], out_dir=tmp_path,
                        progress=False)
