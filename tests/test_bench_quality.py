"""The quality benchmark, driven by stand-in engines on small subsets of HumanEval-Infilling."""

import argparse
import json

import pytest

from infill.bench import quality
from infill.errors import InputError
from infill.protocol import Fill, FillRequest, FillResult, Timings

pytestmark = pytest.mark.skipif(not quality.DEFAULT_DATA_DIR.is_dir(),
                                reason=f"no HumanEval-Infilling data at {quality.DEFAULT_DATA_DIR}")


class OracleEngine:
    """Fills each hole with the task's canonical solution."""

    model_id = "oracle"

    def __init__(self, tasks):
        self.answers = {(t.prompt + t.suffix, len(t.prompt)): t.canonical_solution for t in tasks}

    def fill_batch(self, requests: list[FillRequest]) -> list[FillResult]:
        return [FillResult([Fill(self.answers[(r.text, r.holes[0].start)], 0.0)], Timings(total_ms=5.0), self.model_id)
                for r in requests]


class EmptyEngine:
    model_id = "empty"

    def fill_batch(self, requests):
        return [FillResult([Fill("", 0.0)], Timings(total_ms=1.0), self.model_id) for _ in requests]


def test_pass_at_k_matches_hand_computed_values():
    assert quality.pass_at_k(1, 1, 1) == 1.0
    assert quality.pass_at_k(1, 0, 1) == 0.0
    assert quality.pass_at_k(10, 3, 1) == pytest.approx(0.3)
    # 1 - C(7,2)/C(10,2) = 1 - 21/45
    assert quality.pass_at_k(10, 3, 2) == pytest.approx(24 / 45)
    # 1 - C(2,3)/C(5,3) = 1 - 0: fewer failures than k
    assert quality.pass_at_k(5, 3, 3) == 1.0
    # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert quality.pass_at_k(5, 2, 2) == pytest.approx(0.7)
    with pytest.raises(ValueError):
        quality.pass_at_k(3, 1, 4)


def test_subsets_are_deterministic_and_in_file_order():
    a = [t.task_id for t in quality.load_tasks("single-line", limit=8)]
    b = [t.task_id for t in quality.load_tasks("single-line", limit=8)]
    c = [t.task_id for t in quality.load_tasks("single-line", limit=8, seed=1)]
    everything = [t.task_id for t in quality.load_tasks("single-line")]
    assert a == b and a != c and len(set(a)) == 8
    assert a == sorted(a, key=everything.index)
    assert len(everything) == 1033


@pytest.mark.parametrize("benchmark, size", [("random-span-light", 164), ("multi-line", 5815)])
def test_benchmark_names_map_to_files(benchmark, size):
    assert len(quality.load_tasks(benchmark)) == size


def test_unknown_benchmark_and_missing_data_are_input_errors(tmp_path):
    with pytest.raises(InputError):
        quality.load_tasks("two-line")
    with pytest.raises(InputError):
        quality.load_tasks("single-line", data_dir=tmp_path)


def test_request_puts_an_insertion_hole_between_prompt_and_suffix():
    task = quality.load_tasks("single-line", limit=1)[0]
    request = quality.build_request(task, 32)
    hole = request.holes[0]
    assert request.text[:hole.start] == task.prompt and request.text[hole.end:] == task.suffix
    assert hole.start == hole.end and hole.max_tokens == 32 and request.language == "python"


@pytest.mark.parametrize("benchmark", ["single-line", "multi-line"])
def test_oracle_engine_passes_everything(benchmark, tmp_path):
    tasks = quality.load_tasks(benchmark, limit=8)
    summary = quality.run_quality(OracleEngine(tasks), benchmark, limit=8, out_dir=tmp_path,
                                  workers=2, batch_size=3, progress=False)
    metrics = summary["metrics"]
    assert metrics["pass@1"] == 1.0
    assert metrics["exact_match"] == metrics["exact_match_stripped"] == metrics["parse_rate"] == 1.0
    assert metrics["mean_fill_chars"] == metrics["mean_reference_chars"] > 0
    assert metrics["mean_latency_ms"] == 5.0
    assert summary["n_tasks"] == 8 and summary["model"] == "oracle"
    assert summary["settings"]["max_tokens"] == quality.DEFAULT_MAX_TOKENS[benchmark]
    records = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["task_id"] for r in records] == [t.task_id for t in tasks]
    assert all(r["passed"] for r in records)
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["metrics"] == metrics and "cpu_count" in written["machine"]


def test_empty_engine_mostly_fails(tmp_path):
    summary = quality.run_quality(EmptyEngine(), "single-line", limit=8, out_dir=tmp_path, workers=2,
                                  progress=False)
    metrics = summary["metrics"]
    assert metrics["pass@1"] < 0.5
    assert metrics["exact_match"] == 0.0 and metrics["mean_fill_chars"] == 0.0
    assert 0.0 <= metrics["parse_rate"] <= 1.0


def test_several_samples_report_pass_at_k(tmp_path):
    tasks = quality.load_tasks("single-line", limit=2)
    summary = quality.run_quality(OracleEngine(tasks), "single-line", limit=2, out_dir=tmp_path,
                                  workers=2, samples=10, progress=False)
    assert summary["metrics"]["pass@1"] == summary["metrics"]["pass@10"] == 1.0
    assert "pass@100" not in summary["metrics"]


def test_command_line_arguments_reach_the_run(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    quality.add_arguments(parser)
    args = parser.parse_args(["single-line", "--limit", "2", "--out", str(tmp_path), "--workers", "2",
                              "--max-tokens", "16", "--temperature", "0.5", "--seed", "7"])
    assert quality.options_from_args(args).seed == 7
    tasks = quality.load_tasks("single-line", limit=2)
    assert quality.main(args, OracleEngine(tasks)) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["settings"]["max_tokens"] == 16 and summary["settings"]["options"]["temperature"] == 0.5
    assert "pass@1" in capsys.readouterr().out
