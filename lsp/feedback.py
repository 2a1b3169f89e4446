"""Local acceptance statistics: ``infill.recordFeedback`` counts accepted and rejected suggestions
in a small JSON file in the user's data directory. Nothing leaves the machine, and no code is
stored: only counts, sizes, the language and the model.

The file is ``$INFILL_DATA_DIR/feedback.json``, else ``$XDG_DATA_HOME/infill/feedback.json``, else
``~/.local/share/infill/feedback.json`` (the ``feedback_file`` option overrides it). It is written
atomically (a temporary file beside it, fsync, rename).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

RECENT = 200  # events kept in the file


def default_path() -> Path:
    if os.environ.get("INFILL_DATA_DIR"):
        return Path(os.environ["INFILL_DATA_DIR"]) / "feedback.json"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "infill" / "feedback.json"


def parse_event(args: Any) -> dict[str, Any]:
    """One feedback event from a command's arguments: ``[{"accepted": bool, ...}]``.

    Optional fields: ``kind`` (inline | completion | fill), ``language``, ``model``, ``chars``.
    Raises ValueError for anything else.
    """
    if isinstance(args, list) and len(args) == 1:
        args = args[0]
    if not isinstance(args, dict) or not isinstance(args.get("accepted"), bool):
        raise ValueError('expected one argument {"accepted": true|false, ...}')
    event: dict[str, Any] = {"accepted": args["accepted"], "time": round(time.time(), 3)}
    for name in ("kind", "language", "model"):
        if isinstance(args.get(name), str):
            event[name] = args[name][:100]
    if isinstance(args.get("chars"), int) and not isinstance(args.get("chars"), bool):
        event["chars"] = args["chars"]
    return event


def record(path: Path, event: dict[str, Any]) -> dict[str, Any]:
    """Add ``event`` to the statistics in ``path``; returns the updated totals."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not an object")
    except FileNotFoundError:
        data = {}
    except (OSError, ValueError) as e:
        log.warning("starting %s afresh: %s", path, e)
        data = {}
    totals = data.get("totals") if isinstance(data.get("totals"), dict) else {}
    key = "accepted" if event["accepted"] else "rejected"
    totals[key] = int(totals.get(key, 0)) + 1
    by_kind = data.get("by_kind") if isinstance(data.get("by_kind"), dict) else {}
    kind = by_kind.setdefault(event.get("kind", "unknown"), {"accepted": 0, "rejected": 0})
    kind[key] = int(kind.get(key, 0)) + 1
    recent = data.get("recent") if isinstance(data.get("recent"), list) else []
    recent = (recent + [event])[-RECENT:]
    data = {"version": 1, "totals": totals, "by_kind": by_kind, "recent": recent}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".feedback.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return {"accepted": totals.get("accepted", 0), "rejected": totals.get("rejected", 0)}
