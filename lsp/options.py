"""The server's options: what a client may set through ``initializationOptions`` and
``workspace/didChangeConfiguration``, parsed into a frozen dataclass with defaults.

Parsing never raises: each bad or unknown value is reported as a problem (the server shows them
in one ``window/showMessage``) and that field keeps its default. Keys may be snake_case or
camelCase, at the top level or under an ``"infill"`` section.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Mapping

MAX_TOKENS_LIMIT = 512  # the engine's MAX_HOLE_TOKENS (kept here so this module stays torch-free)


@dataclass(frozen=True)
class Options:
    model_path: str | None = None  # a model directory; None = the server's --model, else the bundled model
    device: str | None = None  # auto | cpu | cuda[:N]; None = the server's --device, else auto
    steps: int | None = None  # denoising steps per fill; None = the engine's schedule
    threshold: float | None = None  # commit every token above this confidence per step; None = fixed tokens per step
    max_tokens: int = 32  # the fill window at the cursor, and the budget of a bare <FILL>
    debounce_ms: int = 30  # wait this long after an automatic request before filling (a newer one cancels it)
    constrained: bool = True  # syntax-checked selection among candidates
    # A second, stricter round for a fill still invalid (engine.fill_batch): more valid fills, but
    # such a fill takes about twice as long, so it is off where a keystroke waits.
    retry: bool = False
    feedback_file: str | None = None  # where infill.recordFeedback writes; None = the user data dir
    # A cursor suggestion whose score (Fill.score: the log-probability of the whole fill) is below this is not
    # shown; None = the model's calibrated default (config.json's min_score), or none. -1000 shows all.
    min_score: float | None = None
    # Candidate fills of a suggestion at the cursor (ghost text or completion list): 1 is the fastest;
    # 0 is the engine's default (a causal model: its greedy fill and draws, ranked by the text
    # after the cursor, about 3x the time). Filling <FILL> holes always gets the default.
    cursor_candidates: int = 1
    # Streaming drafts (opt-in): while a ghost-text suggestion is being filled, its partly denoised
    # fill every this many denoising steps, as infill/draft notifications (lsp/drafts.py); 0: none.
    drafts: int = 0
    # Lines of the other open documents of the same language, the most like the code before the
    # cursor, read as context before the document (infill/text/related.py). Off by default: on 180
    # fresh real-code holes it made the default model's fills no better (BENCHMARKS.md).
    related_files: bool = False

    def model_key(self) -> tuple[str | None, str | None]:
        """What identifies the loaded model: changing it means loading another engine."""
        return (self.model_path, self.device)


_ALIASES = {
    "modelPath": "model_path", "model": "model_path",
    "maxTokens": "max_tokens",
    "debounceMs": "debounce_ms", "debounce": "debounce_ms",
    "feedbackFile": "feedback_file",
    "minScore": "min_score",
    "cursorCandidates": "cursor_candidates",
    "draftEvery": "drafts",
    "relatedFiles": "related_files",
}
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")  # infill/model/device.py: no mps


def _int(value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) and not (isinstance(value, float) and value.is_integer()):
        raise ValueError(f"expected an integer, got {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"must be between {lo} and {hi}, got {value!r}")
    return int(value)


def _check(name: str, value: Any) -> Any:
    """The validated value of one option; ValueError with a reason otherwise."""
    if name in ("model_path", "feedback_file"):
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"expected a path, got {value!r}")
        return value
    if name == "device":
        if value is None:
            return None
        if not isinstance(value, str) or not _DEVICE.fullmatch(value):
            raise ValueError(f"expected auto, cpu, cuda or cuda:N, got {value!r}")
        return value
    if name == "steps":
        return None if value is None else _int(value, 1, MAX_TOKENS_LIMIT)
    if name == "threshold":
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value <= 1.0:
            raise ValueError(f"expected a number in (0, 1], got {value!r}")
        return float(value)
    if name == "min_score":
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value > 0:
            raise ValueError(f"expected a number <= 0 (a log-probability), got {value!r}")
        return float(value)
    if name == "max_tokens":
        return _int(value, 1, MAX_TOKENS_LIMIT)
    if name == "cursor_candidates":
        return _int(value, 0, 16)
    if name == "drafts":
        return _int(value, 0, MAX_TOKENS_LIMIT)
    if name == "debounce_ms":
        return _int(value, 0, 10_000)
    if name in ("constrained", "retry", "related_files"):
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {value!r}")
        return value
    raise AssertionError(name)


def parse_options(raw: Any, base: Options = Options()) -> tuple[Options, list[str]]:
    """Options from a client's JSON value, over ``base``; also the problems found (empty if none)."""
    if raw is None:
        return base, []
    if not isinstance(raw, Mapping):
        return base, [f"options must be an object, got {type(raw).__name__}"]
    if isinstance(raw.get("infill"), Mapping):
        raw = raw["infill"]
    fields = {f.name for f in dataclasses.fields(Options)}
    values: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in raw.items():
        name = _ALIASES.get(key, key) if isinstance(key, str) else key
        if name == "token":  # the transport's token, checked elsewhere
            continue
        if name not in fields:
            problems.append(f"unknown option {key!r}")
            continue
        try:
            values[name] = _check(name, value)
        except ValueError as e:
            problems.append(f"{key}: {e}; using the default")
    return dataclasses.replace(base, **values), problems
