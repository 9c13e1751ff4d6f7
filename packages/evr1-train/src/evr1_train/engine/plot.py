"""The learning-curve PNG: held-out accuracy (and training reward) against step, from the JSONL log.

Why two renderers: matplotlib when it is installed (nicer axes), otherwise a small Pillow drawing (Pillow always
comes with evr1-cache), so the quickstart ends with a picture on any machine.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

Series = Mapping[str, Sequence[tuple[float, float]]]
#: Every curve is a mean accuracy or reward in [0, 1].
Y_LABEL = "accuracy / reward (0-1)"


def curves_from_log(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """`{label: [(step, value), ...]}` for held-out accuracy and the training reward/accuracy."""
    wanted = {
        "val/accuracy": "held-out accuracy",
        "critic/score/mean": "train reward (all rollouts)",
        "critic/accuracy/mean": "train accuracy (online rollouts)",
    }
    out: dict[str, list[tuple[float, float]]] = {v: [] for v in wanted.values()}
    for row in rows:
        for key, label in wanted.items():
            v = row.get(key)
            if isinstance(v, int | float) and math.isfinite(v):
                out[label].append((float(row.get("step", 0)), float(v)))
    return {k: v for k, v in out.items() if v}


def plot_curves(series: Series, path: str | os.PathLike[str], title: str = "evr1 local engine") -> Path:
    """Write the PNG atomically and return its path."""
    from evr1_cache.atomic import atomic_path

    out = Path(path)
    with atomic_path(out, keep_suffix=True) as tmp:
        try:
            _matplotlib(series, tmp, title)
        except ImportError:
            _pillow(series, tmp, title)
    return out


def _matplotlib(series: Series, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    for label, pts in series.items():
        xs, ys = zip(*pts, strict=True) if pts else ((), ())
        ax.plot(xs, ys, marker="o" if "held-out" in label else None, markersize=3, label=label)
    ax.set_xlabel("step")
    ax.set_ylabel(Y_LABEL)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


def _pillow(series: Series, path: Path, title: str) -> None:
    from PIL import Image, ImageDraw

    w, h, m = 760, 420, 50
    img = Image.new("RGB", (w, h), "white")
    d = ImageDraw.Draw(img)
    d.rectangle([m, m, w - m, h - m], outline="black")
    d.text((m, 15), title, fill="black")
    xs = [x for pts in series.values() for x, _ in pts] or [0.0, 1.0]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1

    def px(x: float, y: float) -> tuple[float, float]:
        return (m + (x - x0) / (x1 - x0) * (w - 2 * m), h - m - max(0.0, min(1.0, y)) * (h - 2 * m))

    for i in range(0, 11, 2):
        y = i / 10
        d.text((10, px(x0, y)[1] - 6), f"{y:.1f}", fill="gray")
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"]
    items = list(series.items())
    # training curves first (thin), held-out accuracy last (thick, with markers) so it stays visible
    order = sorted(range(len(items)), key=lambda i: "held-out" in items[i][0])
    for i in order:
        label, pts = items[i]
        c = colours[i % len(colours)]
        held = "held-out" in label
        if len(pts) > 1:
            d.line([px(x, y) for x, y in pts], fill=c, width=3 if held else 1)
        if held:
            for x, y in pts:
                cx, cy = px(x, y)
                d.ellipse([cx - 3, cy - 3, cx + 3, cy + 3], fill=c)
        d.text((m + 10, m + 10 + 14 * i), label, fill=c)
    d.text((m - 5, h - m + 5), f"{x0:g}", fill="gray")
    d.text((w - m - 15, h - m + 5), f"{x1:g}", fill="gray")
    d.text((w // 2, h - m + 15), "step", fill="black")
    d.text((10, m - 18), Y_LABEL, fill="black")
    img.save(path, format="PNG")
