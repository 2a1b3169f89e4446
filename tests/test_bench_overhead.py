"""`infill bench overhead`: the same requests filled with the constraint off and on, timed in pairs."""

import json

import pytest

from infill.bench import overhead, quality

pytestmark = pytest.mark.skipif(not quality.DEFAULT_DATA_DIR.is_dir(),
                                reason=f"no HumanEval-Infilling data at {quality.DEFAULT_DATA_DIR}")


class Recording:
    """Wraps an engine: records each batch's mode and that the context cache was cleared before it."""

    def __init__(self, engine):
        self.engine, self.model_id, self.calls = engine, "recording", []
        self.context_cache = self

    def clear(self):
        self.engine.context_cache.clear()
        self.calls.append("clear")

    def fill_batch(self, requests):
        self.calls.append("c" if requests[0].options.constrained else "u")
        return self.engine.fill_batch(requests)


def test_both_modes_fill_every_task_in_turn_from_a_cold_cache(tiny_engine, tmp_path):
    engine = Recording(tiny_engine)
    summary = overhead.run_overhead(engine, "single-line", limit=5, out_dir=tmp_path, max_tokens=8, batch_size=2,
                                    progress=False)
    # batches of 2, 2, 1; each mode first in every other batch
    assert engine.calls == ["clear", "u", "clear", "c", "clear", "c", "clear", "u", "clear", "u", "clear", "c"]
    m = summary["metrics"]
    assert m["ratio"] == pytest.approx(m["constrained_s"] / m["unconstrained_s"], rel=1e-3)
    records = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["task_id"] for r in records] == [t.task_id for t in quality.load_tasks("single-line", limit=5)]
    assert all(r["unconstrained"]["valid"] is None and r["constrained"]["valid"] in (True, False) for r in records)
    assert m["constrained_valid_rate"] == sum(r["constrained"]["valid"] for r in records) / 5
    assert json.loads((tmp_path / "summary.json").read_text())["metrics"] == m
    assert summary["targets"]["ratio"]["met"] == (m["ratio"] <= 1.3)


def test_the_command_line_runs_it(tiny_model_dir, tmp_path, capsys):
    from infill.cli import main

    code = main(["bench", "overhead", "single-line", "--limit", "2", "--max-tokens", "4", "--out", str(tmp_path),
                 "--model", str(tiny_model_dir), "--device", "cpu"])
    assert code == 0 and "constraint overhead" in capsys.readouterr().out
    assert json.loads((tmp_path / "summary.json").read_text())["n_tasks"] == 2


def test_a_request_the_engine_refuses_fails_its_task_in_that_mode_only(tiny_engine, tmp_path):
    from infill.errors import RequestError

    class RefusesConstrained(Recording):
        def fill_batch(self, requests):
            if requests[0].options.constrained:
                raise RequestError("no")
            return self.engine.fill_batch(requests)

    summary = overhead.run_overhead(RefusesConstrained(tiny_engine), "single-line", limit=2, out_dir=tmp_path,
                                    max_tokens=4, progress=False)
    records = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert all(r["constrained"]["error"] == "no" and "error" not in r["unconstrained"] for r in records)
    assert summary["metrics"]["constrained_valid_rate"] == 0.0
