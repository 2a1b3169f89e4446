"""infill bench calibrate: precision against coverage of the fill score, on result files."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from infill.bench.calibrate import choose, curve, held_out, read_set, run
from infill.errors import InputError


def write(path, records):
    path.mkdir(parents=True, exist_ok=True)
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def quality(score, passed, valid=True, fill="x = 1\n"):
    return {"task_id": "t", "passed": passed, "score": score, "valid": valid, "fill": fill}


def test_threshold_is_the_lowest_score_that_keeps_the_target_precision(tmp_path):
    records = [quality(-0.1, True), quality(-0.2, True), quality(-0.3, False), quality(-0.4, True),
               quality(-0.5, False), quality(-0.6, False), quality(-0.05, False, valid=False), quality(-0.01, True, fill="  ")]
    _, rows = read_set(write(tmp_path / "q", records))
    assert [r["ok"] for r in rows] == [True] * 6 + [False, False]  # invalid and blank fills are never shown
    assert choose(rows, 0.75) == -0.4  # -0.1..-0.4: 3 of 4 right
    assert choose(rows, 0.5) == -0.6  # all six shown: 3 of 6
    assert choose(rows, 1.0) == -0.2
    at = curve(rows, [-0.4, float("-inf")])
    assert at[0]["coverage"] == 4 / 8 and at[0]["precision"] == 0.75
    assert at[1]["coverage"] == 6 / 8 and at[1]["precision"] == 0.5


def test_validity_records_count_exact_constrained_fills(tmp_path):
    records = [{"mode": "constrained", "exact_stripped": True, "score": -0.2, "valid": True, "engine_valid": True, "fill": "a"},
               {"mode": "unconstrained", "exact_stripped": True, "score": -0.1, "valid": True, "fill": "a"},
               {"mode": "constrained", "exact_stripped": False, "score": -0.3, "valid": True, "engine_valid": False, "fill": "b"}]
    name, rows = read_set(write(tmp_path / "validity-x" / "go", records))
    assert name == "real code: go" and len(rows) == 2 and [r["ok"] for r in rows] == [True, False]


def test_run_writes_the_summary_the_plot_and_the_models_min_score(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"name": "m"}))
    cal = write(tmp_path / "cal", [quality(-0.1, True), quality(-0.2, False), quality(-0.3, True), quality(-0.9, False)])
    other = write(tmp_path / "other", [quality(-0.1, False), quality(-1.0, True)])
    summary = run([cal, other], 0.6, tmp_path / "out", model, Console(file=io.StringIO()))
    assert summary["threshold"] == -0.3 and summary["calibration_set"] == "cal"
    assert summary["sets"]["other"]["at_threshold"]["coverage"] == 0.5
    assert json.loads((model / "config.json").read_text())["min_score"] == -0.3
    assert (tmp_path / "out" / "precision_coverage.png").stat().st_size > 1000


def test_one_languages_seeds_pool_into_one_set(tmp_path):
    rec = {"mode": "constrained", "exact_stripped": True, "score": -0.2, "valid": True, "engine_valid": True, "fill": "a"}
    a, b = write(tmp_path / "s7" / "go", [rec]), write(tmp_path / "s11" / "go", [rec, rec])
    cal = write(tmp_path / "cal", [quality(-0.1, True)])
    summary = run([cal, a, b], 0.5, None, None, Console(file=io.StringIO()))
    assert summary["sets"]["real code: go"]["requests"] == 3


def test_several_languages_pool_into_one_more_set_which_can_calibrate(tmp_path):
    def rec(score, right):
        return {"mode": "constrained", "exact_stripped": right, "score": score, "valid": True, "engine_valid": True, "fill": "a"}

    go = write(tmp_path / "s7" / "go", [rec(-1.0, True), rec(-2.0, False)])
    c = write(tmp_path / "s7" / "c", [rec(-1.5, True), rec(-3.0, True)])
    cal = write(tmp_path / "cal", [quality(-0.1, True), quality(-5.0, False)])
    quiet = Console(file=io.StringIO())
    summary = run([cal, go, c], 0.75, None, None, quiet, calibrate_on="real code: all languages")
    assert summary["calibration_set"] == "real code: all languages"
    assert summary["sets"]["real code: all languages"]["requests"] == 4
    assert summary["threshold"] == -3.0  # -1.0, -1.5, -2.0, -3.0 shown: 3 of 4 right
    assert summary["sets"]["cal"]["at_threshold"]["coverage"] == 0.5
    assert run([cal, go], 0.75, None, None, quiet)["sets"].keys() == {"cal", "real code: go"}  # one language: no pool
    with pytest.raises(InputError, match="no such set"):
        run([cal, go], 0.75, None, None, quiet, calibrate_on="real code: rust")


def test_a_given_threshold_is_reported_not_chosen(tmp_path):
    cal = write(tmp_path / "cal", [quality(-1.0, True), quality(-2.0, False), quality(-3.0, True)])
    summary = run([cal], 0.5, None, None, Console(file=io.StringIO()), threshold=-2.5)
    assert summary["threshold"] == -2.5 and summary["calibration_set"] is None
    assert summary["sets"]["cal"]["at_threshold"]["coverage"] == 2 / 3 and summary["sets"]["cal"]["at_threshold"]["precision"] == 0.5


def test_each_run_held_out_is_read_at_the_threshold_chosen_on_the_others(tmp_path):
    """Three seeds' real code: each is read at the threshold the other two choose, and the three
    readings pool over their requests; run() reports it where real code of several runs is given."""
    def rec(score, right):
        return {"mode": "constrained", "exact_stripped": right, "score": score, "valid": True, "engine_valid": True, "fill": "a"}
    seeds = {"s1": [rec(-1, True), rec(-2, False), rec(-3, True), rec(-4, False)],
             "s2": [rec(-1, True), rec(-2, True), rec(-3, False), rec(-4, False)],
             "s3": [rec(-1, False), rec(-2, True), rec(-3, False), rec(-4, False)]}
    runs = {k: read_set(write(tmp_path / k / "go", v))[1] for k, v in seeds.items()}
    got = held_out(runs, 0.75)
    # s2 and s3 pooled, for 0.75: -1 (1 of 2), -2 (3 of 4): -2; on s1 that shows -1 and -2, 1 of 2 right
    assert got["runs"]["s1"]["threshold"] == -2 and got["runs"]["s1"]["precision"] == 0.5
    assert got["runs"]["s2"]["threshold"] == choose(runs["s1"] + runs["s3"], 0.75)
    pooled = got["pooled"]
    shown = sum(r["shown"] for r in got["runs"].values())
    assert pooled["shown"] == shown and pooled["requests"] == 12 and pooled["coverage"] == shown / 12
    summary = run([tmp_path / k / "go" for k in seeds], 0.75, None, None, Console(file=io.StringIO()))
    assert summary["held_out"]["pooled"] == pooled
    one = run([tmp_path / "s1" / "go"], 0.75, None, None, Console(file=io.StringIO()))
    assert "held_out" not in one  # one run: nothing to hold out
