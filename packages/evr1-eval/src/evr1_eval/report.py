"""Compare runs: re-aggregate each run folder's results with the official rules, then write a Markdown table,
`summary.json` and a PNG chart.

Summaries are recomputed from `results*.jsonl` (all ranks merged, last row per id wins) rather than trusted from a
stale `summary.json`, so a report over shards from several machines is the same as one over a single-machine run.
The chart uses matplotlib when the `report` extra is installed; without it a small built-in PNG writer draws the
same grouped bars without text (the Markdown table carries the labels) and the command says how to get labels.
"""

from __future__ import annotations

import dataclasses
import json
import math
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evr1_eval.types import BenchmarkSummary

PALETTE = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75))


@dataclass(frozen=True, slots=True)
class RunReport:
    name: str
    path: str
    summaries: Mapping[str, BenchmarkSummary]
    settings: Mapping[str, Any] = field(default_factory=dict)
    problems: tuple[str, ...] = ()


def _is_bench_summary(path: Path) -> bool:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and "benchmark" in data and "metrics" in data


def _bench_dirs(run_dir: Path) -> list[Path]:
    """`run_dir` itself when it holds results (a benchmark folder), else its benchmark sub-folders."""
    if any(run_dir.glob("results*.jsonl")):
        return [run_dir]
    return sorted(
        p
        for p in run_dir.iterdir()
        if p.is_dir() and (any(p.glob("results*.jsonl")) or _is_bench_summary(p / "summary.json"))
    )


def _summary_from_json(data: Mapping[str, Any]) -> BenchmarkSummary:
    names = {f.name for f in dataclasses.fields(BenchmarkSummary)}
    return BenchmarkSummary(**{k: v for k, v in data.items() if k in names})


def collect_run(run_dir: Path) -> RunReport:
    """Every benchmark of one run folder (or one benchmark folder), re-aggregated from its rows."""
    from evr1_eval.benchmarks import get_benchmark
    from evr1_eval.results import load_rows

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run folder {run_dir} does not exist")
    summaries: dict[str, BenchmarkSummary] = {}
    settings: dict[str, Any] = {}
    problems: list[str] = []
    for bench_dir in _bench_dirs(run_dir):
        rows = load_rows(bench_dir) if any(bench_dir.glob("results*.jsonl")) else []
        name = rows[0].benchmark if rows else bench_dir.name
        try:
            bench = get_benchmark(name)
        except KeyError as exc:
            problems.append(f"{bench_dir}: {exc.args[0]}")
            continue
        if rows:
            summaries[bench.name] = bench.aggregate(rows)
        else:
            summaries[bench.name] = _summary_from_json(json.loads((bench_dir / "summary.json").read_text("utf-8")))
        for run_json in sorted(bench_dir.glob("run*.json")):
            try:
                settings[bench.name] = json.loads(run_json.read_text("utf-8"))
            except json.JSONDecodeError:
                problems.append(f"{run_json}: not valid JSON")
            break
    if not summaries:
        problems.append(f"{run_dir}: no benchmark results found (expected <benchmark>/results.jsonl)")
    return RunReport(run_dir.name or str(run_dir), str(run_dir), summaries, settings, tuple(problems))


def _unique_names(runs: Sequence[RunReport]) -> list[str]:
    names: list[str] = []
    for run in runs:
        name = run.name
        k = 2
        while name in names:
            name, k = f"{run.name}#{k}", k + 1
        names.append(name)
    return names


def primary_value(summary: BenchmarkSummary | None) -> float | None:
    if summary is None:
        return None
    value = summary.metrics.get(summary.primary)
    return None if value is None or math.isnan(value) else float(value)


def _cell(summary: BenchmarkSummary | None) -> str:
    if summary is None:
        return "-"
    value = primary_value(summary)
    pending = int(summary.counts.get("judge_pending", 0))
    if value is None:
        return "needs judge" if pending else "n/a"
    mark = f" ({pending} need judge)" if pending else ""
    return f"{value:.1f}{mark}"


def markdown_table(runs: Sequence[RunReport]) -> str:
    """Benchmarks as rows, runs as columns, the official primary metric in each cell."""
    names = _unique_names(runs)
    benches = sorted({b for run in runs for b in run.summaries})
    header = "| benchmark | metric | " + " | ".join(names) + " |"
    lines = [header, "|" + "---|" * (len(names) + 2)]
    for bench in benches:
        primary = next(run.summaries[bench].primary for run in runs if bench in run.summaries)
        cells = [_cell(run.summaries.get(bench)) for run in runs]
        lines.append(f"| {bench} | {primary} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


#: Video-MMMU's Δknowledge: how much of the Adaptation accuracy a run gains by watching the lecture video, relative to
#: what was left to gain without it (arXiv 2501.13826): (after - before) / (100 - before) x 100.
DELTA_BENCH, DELTA_TRACK = "videommmu", "track/Adaptation"


def without_video(run: RunReport, bench: str) -> bool:
    """Was this run's `bench` evaluated with `--without-video` (recorded in its run.json fingerprint)?"""
    record = run.settings.get(bench) or {}
    return bool(dict(record.get("fingerprint") or {}).get("without_video"))


def delta_knowledge(runs: Sequence[RunReport]) -> dict[str, Any] | None:
    """Δknowledge of every normal Video-MMMU run against the `--without-video` run (the first, if several); None
    unless both kinds are present. Per run: the value, or None when a side lacks Adaptation rows or before is 100."""
    names = _unique_names(runs)
    pairs = [(n, r) for n, r in zip(names, runs, strict=True) if DELTA_BENCH in r.summaries]
    baselines = [(n, r) for n, r in pairs if without_video(r, DELTA_BENCH)]
    after = [(n, r) for n, r in pairs if not without_video(r, DELTA_BENCH)]
    if not baselines or not after:
        return None
    base_name, base = baselines[0]
    before = base.summaries[DELTA_BENCH].metrics.get(DELTA_TRACK)
    values: dict[str, float | None] = {}
    for name, run in after:
        acc = run.summaries[DELTA_BENCH].metrics.get(DELTA_TRACK)
        ok = before is not None and acc is not None and before < 100.0
        values[name] = (acc - before) / (100.0 - before) * 100.0 if ok else None  # type: ignore[operator]
    notes = [f"{len(baselines)} --without-video runs: {base_name} is the baseline"] if len(baselines) > 1 else []
    return {"baseline": base_name, "before": before, "runs": values, "notes": notes}


def _delta_markdown(delta: Mapping[str, Any]) -> str:
    before = delta["before"]
    lines = [
        "## Video-MMMU Δknowledge",
        "",
        f"Adaptation accuracy without the video ({delta['baseline']}): "
        + ("n/a" if before is None else f"{before:.1f}")
        + ". Δknowledge = (after - before) / (100 - before) x 100.",
        "",
        "| run | Δknowledge (%) |",
        "|---|---|",
        *(f"| {n} | {'n/a' if v is None else f'{v:+.1f}'} |" for n, v in delta["runs"].items()),
        *(f"\n{note}" for note in delta["notes"]),
    ]
    return "\n".join(lines) + "\n"


def summary_json(runs: Sequence[RunReport]) -> dict[str, Any]:
    delta = delta_knowledge(runs)
    return {
        **({"videommmu_delta_knowledge": delta} if delta else {}),
        "runs": [
            {
                "name": name,
                "path": run.path,
                "benchmarks": {b: dataclasses.asdict(s) for b, s in sorted(run.summaries.items())},
                "settings": dict(run.settings),
                "problems": list(run.problems),
            }
            for name, run in zip(_unique_names(runs), runs, strict=True)
        ],
    }


# -- chart ---------------------------------------------------------------------------------------------------------
def _chart_data(runs: Sequence[RunReport]) -> tuple[list[str], list[str], list[list[float | None]]]:
    names = _unique_names(runs)
    benches = sorted({b for run in runs for b in run.summaries})
    values = [[primary_value(run.summaries.get(b)) for b in benches] for run in runs]
    return names, benches, values


def write_chart_matplotlib(runs: Sequence[RunReport], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names, benches, values = _chart_data(runs)
    width = 0.8 / max(1, len(names))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(benches) * max(1, len(names)) ** 0.5 + 2), 4.5))
    for i, (name, vals) in enumerate(zip(names, values, strict=True)):
        xs = [j + i * width - 0.4 + width / 2 for j in range(len(benches))]
        ax.bar(xs, [v if v is not None else float("nan") for v in vals], width=width, label=name)
    ax.set_xticks(range(len(benches)))
    ax.set_xticklabels(benches, rotation=35, ha="right")
    ax.set_ylabel("official primary metric (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize="small")
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)


def _png_bytes(width: int, height: int, pixels: bytearray) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    stride = width * 3
    raw = b"".join(b"\x00" + bytes(pixels[y * stride : (y + 1) * stride]) for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def write_chart_stdlib(runs: Sequence[RunReport], path: Path) -> None:
    """Grouped bars (one colour per run, in table order), gridlines every 20 %, no text."""
    names, benches, values = _chart_data(runs)
    group_w, bar_w, margin, plot_h = max(12, 8 * len(names) + 8), 8, 20, 200
    width = margin * 2 + max(1, len(benches)) * group_w
    height = plot_h + margin * 2
    px = bytearray(b"\xff" * (width * height * 3))

    def fill(x0: int, y0: int, x1: int, y1: int, rgb: tuple[int, int, int]) -> None:
        for y in range(max(0, y0), min(height, y1)):
            row = y * width * 3
            for x in range(max(0, x0), min(width, x1)):
                px[row + 3 * x : row + 3 * x + 3] = bytes(rgb)

    base = margin + plot_h
    for k in range(0, 101, 20):
        y = base - k * plot_h // 100
        fill(margin, y, width - margin, y + 1, (220, 220, 220))
    for j in range(len(benches)):
        for i, vals in enumerate(values):
            v = vals[j]
            if v is None:
                continue
            h = round(max(0.0, min(100.0, v)) * plot_h / 100)
            x0 = margin + j * group_w + 4 + i * bar_w
            fill(x0, base - h, x0 + bar_w - 1, base, PALETTE[i % len(PALETTE)])
    fill(margin, base, width - margin, base + 1, (0, 0, 0))
    tmp = path.with_name(f".{path.name}.tmp.png")
    tmp.write_bytes(_png_bytes(width, height, px))
    tmp.replace(path)


def write_chart(runs: Sequence[RunReport], path: Path, *, backend: str = "auto") -> str:
    """Write the PNG; returns the backend used ("matplotlib" or "stdlib")."""
    if backend not in ("auto", "matplotlib", "stdlib"):
        raise ValueError(f"chart backend must be auto, matplotlib or stdlib, got {backend!r}")
    if backend in ("auto", "matplotlib"):
        try:
            write_chart_matplotlib(runs, path)
            return "matplotlib"
        except ImportError:
            if backend == "matplotlib":
                raise ImportError("matplotlib is not installed: pip install 'evr1-eval[report]'") from None
    write_chart_stdlib(runs, path)
    return "stdlib"


def write_report(runs: Sequence[RunReport], out_dir: Path, *, chart: str = "auto") -> dict[str, str]:
    """report.md, summary.json and chart.png in `out_dir` (atomic writes); returns what was written."""
    from evr1_eval.results import write_json_atomic

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    table = markdown_table(runs)
    notes = [
        f"- {name} / {b}: {n}"
        for name, run in zip(_unique_names(runs), runs, strict=True)
        for b, s in sorted(run.summaries.items())
        for n in s.notes
    ]
    md = "# evr1-eval report\n\n" + table + ("\n## Notes\n\n" + "\n".join(notes) + "\n" if notes else "")
    delta = delta_knowledge(runs)
    if delta:
        md += "\n" + _delta_markdown(delta)
    tmp = out_dir / ".report.md.tmp"
    tmp.write_text(md, encoding="utf-8")
    tmp.replace(out_dir / "report.md")
    write_json_atomic(out_dir / "summary.json", summary_json(runs))
    written = {"markdown": str(out_dir / "report.md"), "summary": str(out_dir / "summary.json")}
    if chart != "none":
        written["chart_backend"] = write_chart(runs, out_dir / "chart.png", backend=chart)
        written["chart"] = str(out_dir / "chart.png")
    return written
