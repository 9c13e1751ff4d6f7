"""Line charts as inline SVG (no JavaScript, no chart library): reward and accuracy per task over training steps."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from evr1_cache.viewer.records import Curve

#: Colour-blind-safe palette (Okabe-Ito), then greys.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000", "#999999")
WIDTH, HEIGHT = 560, 260
PAD_L, PAD_R, PAD_T, PAD_B = 48, 150, 28, 34


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, n - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    out, v = [], first
    while v <= hi + step * 1e-9:
        out.append(round(v, 10))
        v += step
    return out


def _fmt(v: float) -> str:
    return f"{v:.0f}" if abs(v - round(v)) < 1e-9 else f"{v:.2f}".rstrip("0").rstrip(".")


def line_chart(title: str, curves: Sequence[Curve], *, unit_range: bool = False) -> str:
    """An SVG line chart of `curves` (one line per series). `unit_range` fixes the y axis to [0, 1]."""
    pts = [p for c in curves for p in c.points]
    if not pts:
        return ""
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if unit_range and min(ys) >= 0 and max(ys) <= 1:
        y0, y1 = 0.0, 1.0
    else:
        y0, y1 = min(ys), max(ys)
        if y1 == y0:
            y0, y1 = y0 - 0.5, y1 + 0.5
        margin = (y1 - y0) * 0.08
        y0, y1 = y0 - margin, y1 + margin
    pw, ph = WIDTH - PAD_L - PAD_R, HEIGHT - PAD_T - PAD_B

    def sx(x: float) -> float:
        return PAD_L + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return PAD_T + (1 - (y - y0) / (y1 - y0)) * ph

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f'<text class="chart-title" x="{PAD_L}" y="16">{escape(title)}</text>',
    ]
    for t in _ticks(y0, y1):
        y = sy(t)
        parts.append(f'<line class="grid" x1="{PAD_L}" x2="{PAD_L + pw}" y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(f'<text class="tick" x="{PAD_L - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    for t in _ticks(x0, x1, 6):
        if x0 <= t <= x1:
            x = sx(t)
            parts.append(f'<text class="tick" x="{x:.1f}" y="{PAD_T + ph + 16}" text-anchor="middle">{_fmt(t)}</text>')
    parts.append(f'<rect class="frame" x="{PAD_L}" y="{PAD_T}" width="{pw}" height="{ph}"/>')
    parts.append(f'<text class="axis" x="{PAD_L + pw / 2:.0f}" y="{HEIGHT - 4}" text-anchor="middle">step</text>')
    for i, curve in enumerate(sorted(curves, key=lambda c: (c.series != "all", c.series))):
        color = PALETTE[i % len(PALETTE)]
        points = sorted(curve.points)
        path = " ".join(f"{'M' if j == 0 else 'L'}{sx(x):.1f},{sy(y):.1f}" for j, (x, y) in enumerate(points))
        width = 2.5 if curve.series == "all" else 1.6
        parts.append(
            f'<g class="series" data-series="{escape(curve.series)}"><path d="{path}" stroke="{color}" '
            f'stroke-width="{width}" fill="none"/>'
        )
        for x, y in points:
            parts.append(
                f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.4" fill="{color}">'
                f"<title>{escape(curve.series)} step {_fmt(x)}: {y:.3f}</title></circle>"
            )
        parts.append("</g>")
        ly = PAD_T + 6 + i * 16
        parts.append(f'<rect x="{PAD_L + pw + 12}" y="{ly}" width="10" height="10" fill="{color}"/>')
        label = curve.series if len(curve.series) <= 18 else curve.series[:17] + "…"
        parts.append(f'<text class="legend" x="{PAD_L + pw + 27}" y="{ly + 9}">{escape(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)
