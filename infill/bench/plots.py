"""PNG plots of benchmark results (matplotlib, headless Agg backend; imported only when plotting).

- ``tokens_per_s_vs_window.png``: tokens/s (and slots/s, dashed) against window length, a line per context;
- ``latency_vs_steps.png``: p50 latency (p95 as a band) against denoising steps;
- ``frontier.png``: pass@1 against tokens/s of quality runs made at different settings;
- ``quality_vs_steps.png``: pass@1 against steps of those runs.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _title(summary: dict, what: str) -> str:
    device = (summary.get("gpu") or {}).get("name") or summary.get("device", "")
    return f"{what}\n{summary.get('model', '')} · {device}"


def _save(fig, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path.name


def tokens_per_s_vs_window(summary: dict, path: Path) -> str | None:
    rows = [r for r in summary["rows"] if r["section"] == "grid"]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for i, context in enumerate(sorted({r["context"] for r in rows})):
        cell = sorted((r for r in rows if r["context"] == context), key=lambda r: r["window"])
        xs = [r["window"] for r in cell]
        color = f"C{i}"
        ax.plot(xs, [r["tokens_per_s"] for r in cell], "o-", color=color, label=f"context {context}: tokens/s")
        ax.plot(xs, [r["slots_per_s"] for r in cell], "s--", color=color, alpha=0.5, label=f"context {context}: slots/s")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted({r["window"] for r in rows}), [str(w) for w in sorted({r["window"] for r in rows})])
    ax.set_xlabel("window (tokens)")
    ax.set_ylabel("per second")
    ax.set_title(_title(summary, "tokens/s against window length"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, path)


def latency_vs_steps(summary: dict, path: Path) -> str | None:
    rows = sorted((r for r in summary["rows"] if r["section"] == "steps"), key=lambda r: r["steps"])
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    xs = [r["steps"] for r in rows]
    ax.plot(xs, [r["p50_ms"] for r in rows], "o-", label="p50")
    ax.fill_between(xs, [r["p50_ms"] for r in rows], [r["p95_ms"] for r in rows], alpha=0.2, label="p50..p95")
    if all("floor_ms" in r for r in rows):
        ax.plot(xs, [r["floor_ms"] for r in rows], "k:", label="FLOP floor")
        ax.plot(xs, [r["floor_bw_ms"] for r in rows], "k-.", alpha=0.5, label="bandwidth floor")
        ax.set_yscale("log")  # the floors sit orders of magnitude below
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_xlabel("denoising steps")
    ax.set_ylabel("latency (ms)")
    r0 = rows[0]
    ax.set_title(_title(summary, f"latency against steps (window {r0['window']}, context {r0['context']})"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def frontier(summary: dict, path: Path) -> str | None:
    rows = [r for r in summary["rows"] if r["section"] == "frontier" and r.get("pass@1") is not None]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for i, r in enumerate(rows):
        ax.scatter([r["tokens_per_s"]], [r["pass@1"]], color=f"C{i % 10}")
        ax.annotate(r["label"], (r["tokens_per_s"], r["pass@1"]), fontsize=7, xytext=(4, 4),
                    textcoords="offset points")
    ax.set_xlabel(f"tokens/s (one stream, context {rows[0]['context']})")
    ax.set_ylabel("pass@1")
    ax.set_title(_title(summary, "speed-quality frontier"))
    ax.grid(alpha=0.3)
    return _save(fig, path)


def quality_vs_steps(quality: list[dict], path: Path, title: str = "quality against steps") -> str | None:
    """pass@1 against steps of quality runs, a line per benchmark (runs at the default schedule are left out)."""
    points = [(q.get("benchmark", "?"), q["settings"]["options"].get("steps"), q["metrics"].get("pass@1"))
              for q in quality]
    points = [p for p in points if p[1] is not None and p[2] is not None]
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for i, bench in enumerate(sorted({p[0] for p in points})):
        mine = sorted((s, v) for b, s, v in points if b == bench)
        ax.plot([s for s, _ in mine], [v for _, v in mine], "o-", color=f"C{i}", label=bench)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("denoising steps")
    ax.set_ylabel("pass@1")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def speed_plots(summary: dict, out: Path, quality: list[dict] = ()) -> list[str]:
    """Every plot the speed summary (and the quality summaries beside it) supports; the file names."""
    out = Path(out)
    made = [tokens_per_s_vs_window(summary, out / "tokens_per_s_vs_window.png"),
            latency_vs_steps(summary, out / "latency_vs_steps.png"),
            frontier(summary, out / "frontier.png"),
            quality_vs_steps(list(quality), out / "quality_vs_steps.png",
                             f"quality against steps\n{summary.get('model', '')}")]
    return [m for m in made if m]
