"""What a model directory declares in its config.json, read without loading the model (no torch).

A language server advertises the languages before its model has loaded, and a client (a benchmark
typing against ``infill serve``) asks for suggestions with the model's own floor, as the language
server does. Nothing here validates a checkpoint: an unreadable or odd config.json declares nothing
(the model's loader, infill/model/registry.py, is where a broken checkpoint is reported).
"""

from __future__ import annotations

import json
from pathlib import Path


def bundled_model_dir() -> Path:
    """The bundled model's directory (infill.engine.fill.DEFAULT_MODEL_DIR, without importing torch)."""
    return Path(__file__).resolve().parent / "default_model"


def model_config(model_dir: Path) -> dict:
    """A model directory's config.json ({} where unreadable or not a JSON object)."""
    try:
        data = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def declared_languages(model_dir: Path) -> tuple[str, ...] | None:
    """config.json's ``languages`` (what DiffusionModel.languages will say once loaded); None if it says none."""
    langs = model_config(model_dir).get("languages")
    return tuple(str(x) for x in langs) if isinstance(langs, list) and langs else None


def declared_min_score(model_dir: Path) -> float | None:
    """config.json's ``min_score``: the score (Fill.score: the log-probability of a whole fill) under which
    the model's cursor suggestions are not shown, as calibrated for that model; None: none."""
    value = model_config(model_dir).get("min_score")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
