"""Compare runs: re-aggregate each run folder's results with the official rules, then write a Markdown table,
`summary.json` and a PNG chart.

Summaries are recomputed from `results*.jsonl` (all ranks merged, last row per id wins) rather than trusted from a
stale `summary.json`, so a report over shards from several machines is the same as one over a single-machine run.
Each cell shows the official protocol's headline and, beside it, the evr1 protocol's accuracy (evr1-rewards, as
training scores); the run's own protocol (how it asked) is in its manifest. The report prints every run's manifest
(protocol, preset, model, engine, frames, decoding) and warns when compared runs differ in a setting that changes
numbers. The chart uses matplotlib when the `report` extra is installed (every bar labelled with its value, "0.0"
included; a missing result is marked "n/a"); without it a small built-in PNG writer draws the same grouped bars
without text — a zero result as a short dark stub on the axis, a missing one as nothing — and the command says how to
get labels.

Every number is checked before it is shown (evr1_eval.verify): each stored response is re-scored offline with the
benchmark's scorer and the rows checked against the annotations and the run's record; report.md and the terminal say
"verified N/N" per benchmark, or name every problem, and `evr1-eval report` then exits non-zero.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import math
import re
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evr1_cache.atomic import atomic_bytes, atomic_path, atomic_text
from evr1_eval.types import BenchmarkSummary, Reading
from evr1_eval.verify import Annotations, Verification, verify_benchmark

if TYPE_CHECKING:
    from evr1_eval.api.base import Benchmark
    from evr1_eval.results import Sources

#: Problems listed per benchmark in report.md (all of them are printed and in summary.json).
SHOWN_PROBLEMS = 20
PALETTE = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75))


@dataclass(frozen=True, slots=True)
class RunReport:
    name: str
    path: str
    summaries: Mapping[str, BenchmarkSummary]
    settings: Mapping[str, Any] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    #: benchmark -> the manifest.json written beside its results (None for runs written before manifests existed).
    manifests: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    #: benchmark -> its stored rows re-scored and checked against the annotations and the run's record.
    verifications: Mapping[str, Verification] = field(default_factory=dict)
    #: benchmark -> the annotations its rows were checked against (the viewer shows them), or why none loaded.
    annotations: Mapping[str, Annotations | str] = field(default_factory=dict)

    @property
    def verified(self) -> bool:
        """Every benchmark of the run verified (a report of unverified numbers exits non-zero)."""
        return all(v.ok for v in self.verifications.values())


def _is_bench_summary(path: Path) -> bool:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and "benchmark" in data and "metrics" in data


def bench_dirs(run_dir: Path) -> list[Path]:
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


def _benchmark_of(bench_dir: Path, rows: Sequence[Any]) -> str:
    """The benchmark a folder holds: its manifest's (the run's record), else the folder's name when it is one, else
    what its first row says (rows are checked against it: a row claiming another benchmark is flagged)."""
    from evr1_eval import manifest
    from evr1_eval.benchmarks import get_benchmark

    recorded = (manifest.read(bench_dir) or {}).get("benchmark")
    if isinstance(recorded, str) and recorded:
        return recorded
    with contextlib.suppress(KeyError):
        return get_benchmark(bench_dir.name).name
    return rows[0].benchmark if rows else bench_dir.name


def run_annotations(bench: Benchmark, bench_dir: Path, given: Sources | None = None) -> Annotations | str:
    """The annotations a run of `bench` was evaluated on (run.json's recorded command, or `given`) and the ids it
    selected (manifest.json's limit and world size), or why they cannot be loaded."""
    from evr1_eval import manifest
    from evr1_eval.jobs import file_digest, load_job
    from evr1_eval.results import Sources, read_run_settings, recorded_sources, select

    settings = read_run_settings(bench_dir)
    recorded = recorded_sources(settings)
    record = manifest.read(bench_dir) or {}
    given = given or Sources()
    folder = given.annotations_dir or recorded.annotations_dir
    scored = (record.get("sources") or {}).get("annotations_file")  # written by `evr1-eval score`
    try:
        if folder is not None:
            job = load_job(
                bench, folder, given.media_root or recorded.media_root,
                allow_outside_media=True, allow_remote_media=recorded.allow_remote_media,
            )  # fmt: skip
            samples, source = list(job.samples), str(job.source or "")
        elif isinstance(scored, str):
            samples = list(bench.load(Path(scored), allow_outside_media=True).samples)
            source = file_digest(Path(scored))
        else:
            return "no annotations recorded or given: rows cannot be re-scored (pass --annotations-dir)"
    except (OSError, KeyError, ValueError) as exc:
        return f"annotations not loaded ({exc}): rows cannot be re-scored"
    digest = dict(settings.get("fingerprint") or {}).get("annotations") or (record.get("annotations") or {}).get(
        "digest"
    )
    note = None
    if digest and source and digest != source:
        note = "the annotation file changed since the run: rows are checked against today's file"
    world = record["world_size"] if isinstance(record.get("world_size"), int) else 1
    limit = record["limit"] if isinstance(record.get("limit"), int) else None
    chosen = (s.id for r in range(max(1, world)) for s in select(samples, limit=limit, rank=r, world_size=world))
    return Annotations({s.id: s for s in samples}, frozenset(chosen), note)


def collect_run(run_dir: Path, given: Sources | None = None) -> RunReport:
    """Every benchmark of one run folder (or one benchmark folder), re-aggregated from its rows, which are verified
    (evr1_eval.verify) against the annotations the run recorded (or `given`)."""
    from evr1_eval import manifest
    from evr1_eval.benchmarks import get_benchmark
    from evr1_eval.results import load_rows, read_run_settings

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run folder {run_dir} does not exist")
    summaries: dict[str, BenchmarkSummary] = {}
    settings: dict[str, Any] = {}
    manifests: dict[str, Mapping[str, Any] | None] = {}
    verifications: dict[str, Verification] = {}
    annotations: dict[str, Annotations | str] = {}
    problems: list[str] = []
    for bench_dir in bench_dirs(run_dir):
        rows = load_rows(bench_dir) if any(bench_dir.glob("results*.jsonl")) else []
        name = _benchmark_of(bench_dir, rows)
        try:
            bench = get_benchmark(name)
        except KeyError as exc:
            problems.append(f"{bench_dir}: {exc.args[0]}")
            continue
        if rows:
            summaries[bench.name] = bench.aggregate(rows)
        else:
            summaries[bench.name] = _summary_from_json(json.loads((bench_dir / "summary.json").read_text("utf-8")))
        manifests[bench.name] = manifest.read(bench_dir)
        annotations[bench.name] = run_annotations(bench, bench_dir, given)
        found = verify_benchmark(bench_dir, bench, annotations[bench.name])
        verifications[bench.name] = found
        problems += [f"{bench.name}: {p}" for p in found.problems]
        recorded = read_run_settings(bench_dir, problems)
        if recorded:
            settings[bench.name] = recorded
    if not summaries:
        problems.append(f"{run_dir}: no benchmark results found (expected <benchmark>/results.jsonl)")
    name = run_dir.name or str(run_dir)
    return RunReport(name, str(run_dir), summaries, settings, tuple(problems), manifests, verifications, annotations)


#: Characters with a meaning in Markdown (an underscore only outside a word), backslash-escaped in `md_text` (`<`, `>` and `&` become HTML entities).
_MD_SPECIAL = re.compile(r"([\\`*\[\]|~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")  # `m_avg` keeps its `_`
_URL = re.compile(r"https?://[^\s<>]+")


def md_text(value: object) -> str:
    """`value` as literal text in Markdown: one line, no markup, no HTML (a run named `<script>` or `| x |` shows as
    written). Every value from a run folder, a manifest or the command line passes here before it reaches report.md."""
    text = " ".join(str(value).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text)


def _md_reference(ref: str) -> str:
    """A benchmark's reference: an autolink when it is one URL, else literal text."""
    return f"<{ref}>" if _URL.fullmatch(ref) else md_text(ref)


def _unique_names(runs: Sequence[RunReport]) -> list[str]:
    names: list[str] = []
    for run in runs:
        candidates = itertools.chain([run.name], (f"{run.name}#{k}" for k in itertools.count(2)))
        names.append(next(name for name in candidates if name not in names))
    return names


def primary_value(summary: BenchmarkSummary | None, *, evr1: bool = False) -> float | None:
    """The official headline (with `evr1`: the evr1 protocol's accuracy); None when missing or NaN."""
    if summary is None:
        return None
    value = summary.evr1_metrics.get("accuracy") if evr1 else summary.metrics.get(summary.primary)
    return None if value is None or math.isnan(value) else float(value)


def _cell(summary: BenchmarkSummary | None) -> str:
    if summary is None:
        return "-"
    value = primary_value(summary)
    pending = int(summary.counts.get("judge_pending", 0))
    evr1 = primary_value(summary, evr1=True)
    tail = f" · evr1 {evr1:.1f}" if evr1 is not None else ""
    if value is None:
        return ("needs judge" if pending else "n/a") + tail
    mark = f" ({pending} need judge)" if pending else ""
    return f"{value:.1f}{mark}{tail}"


def markdown_table(runs: Sequence[RunReport]) -> str:
    """Benchmarks as rows, runs as columns: the official primary metric (the headline) and the evr1 accuracy."""
    names = _unique_names(runs)
    benches = sorted({b for run in runs for b in run.summaries})
    header = "| benchmark | metric | " + " | ".join(md_text(n) for n in names) + " |"
    lines = [header, "|" + "---|" * (len(names) + 2)]
    for bench in benches:
        primary = next(run.summaries[bench].primary for run in runs if bench in run.summaries)
        cells = [_cell(run.summaries.get(bench)) for run in runs]
        lines.append(f"| {md_text(bench)} | {md_text(primary)} | " + " | ".join(md_text(c) for c in cells) + " |")
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
        if before is None or acc is None or before >= 100.0:
            values[name] = None
        else:
            values[name] = (acc - before) / (100.0 - before) * 100.0
    notes = [f"{len(baselines)} --without-video runs: {base_name} is the baseline"] if len(baselines) > 1 else []
    return {"baseline": base_name, "before": before, "runs": values, "notes": notes}


def _delta_markdown(delta: Mapping[str, Any]) -> str:
    before = delta["before"]
    lines = [
        "## Video-MMMU Δknowledge",
        "",
        f"Adaptation accuracy without the video ({md_text(delta['baseline'])}): "
        + ("n/a" if before is None else f"{before:.1f}")
        + ". Δknowledge = (after - before) / (100 - before) x 100.",
        "",
        "| run | Δknowledge (%) |",
        "|---|---|",
        *(f"| {md_text(n)} | {'n/a' if v is None else f'{v:+.1f}'} |" for n, v in delta["runs"].items()),
        *(f"\n{md_text(note)}" for note in delta["notes"]),
    ]
    return "\n".join(lines) + "\n"


def settings_warnings(runs: Sequence[RunReport]) -> list[str]:
    """Per benchmark, the number-changing settings on which the compared runs differ (from their manifests, or from
    run.json's fingerprint for runs written before manifests)."""
    from evr1_eval import manifest

    names = _unique_names(runs)
    out: list[str] = []
    for bench in sorted({b for run in runs for b in run.summaries}):
        records: dict[str, Mapping[str, Any] | None] = {}
        for name, run in zip(names, runs, strict=True):
            if bench not in run.summaries:
                continue
            record = run.manifests.get(bench)
            if record is None and bench in run.settings:
                fp = dict(run.settings[bench].get("fingerprint") or {})
                record = manifest.build(fp) if fp else None
            records[name] = record
        out += [f"{bench}: {line}" for line in manifest.differences(records)]
    return out


def _manifest_line(record: Mapping[str, Any] | None) -> str:
    if not record:
        return "no manifest (written by an older evr1-eval)"
    protocol = record.get("protocol") or {}
    preset = (record.get("preset") or {}).get("name") or "none"
    sampling = record.get("sampling") or {}
    frames = ", ".join(
        f"{k}={sampling[k]}" for k in ("fps", "nframes", "max_frames", "max_pixels", "total_pixels") if sampling.get(k)
    )
    generation = record.get("generation") or {}
    decoding = ", ".join(f"{k}={generation[k]}" for k in ("temperature", "top_p", "max_tokens") if k in generation)
    engine = (record.get("backend") or {}).get("engine") or (record.get("backend") or {}).get("backend") or "-"
    variant = protocol.get("prompt_variant", "official")
    default = Reading()  # a manifest from before a field existed: that field's default
    tags = record.get("answer_tags") or default.answer_tags
    reasoning = record.get("reasoning_tags") or default.reasoning_tags
    return (
        f"protocol {protocol.get('protocol', 'official')} (prompt {variant}), preset {preset}, model "
        f"{record.get('model') or '-'}, engine {engine}; frames {frames or '-'}; decoding {decoding or '-'}; "
        f"answer tags {tags}; reasoning tags {reasoning}"
    )


def verification_markdown(runs: Sequence[RunReport]) -> str:
    """Per run and benchmark "verified N/N", or a warning naming every problem (evr1_eval.verify)."""
    lines: list[str] = []
    for name, run in zip(_unique_names(runs), runs, strict=True):
        for _bench, found in sorted(run.verifications.items()):
            lines.append(f"- {md_text(name)} / {md_text(found.line())}")
            lines += [f"  - {md_text(p)}" for p in found.problems[:SHOWN_PROBLEMS]]
            if len(found.problems) > SHOWN_PROBLEMS:
                lines.append(f"  - ... and {len(found.problems) - SHOWN_PROBLEMS} more")
    if not lines:
        return ""
    head = "## Verification\n\n" if all(r.verified for r in runs) else "## Verification: **results NOT verified**\n\n"
    return head + "\n".join(lines) + "\n\n"


def manifests_markdown(runs: Sequence[RunReport]) -> str:
    lines = ["## Run settings (manifest.json)", ""]
    for name, run in zip(_unique_names(runs), runs, strict=True):
        for bench in sorted(run.summaries):
            lines.append(f"- {md_text(name)} / {md_text(bench)}: {md_text(_manifest_line(run.manifests.get(bench)))}")
    return "\n".join(lines) + "\n"


def summary_json(runs: Sequence[RunReport]) -> dict[str, Any]:
    delta = delta_knowledge(runs)
    return {
        **({"videommmu_delta_knowledge": delta} if delta else {}),
        "settings_warnings": settings_warnings(runs),
        "runs": [
            {
                "name": name,
                "path": run.path,
                "benchmarks": {b: dataclasses.asdict(s) for b, s in sorted(run.summaries.items())},
                "settings": dict(run.settings),
                "manifests": dict(sorted(run.manifests.items())),
                "problems": list(run.problems),
                "verified": {
                    b: {"verified": v.verified, "total": v.total, "ok": v.ok}
                    for b, v in sorted(run.verifications.items())
                },
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


def bar_label(value: float | None) -> str:
    """The text over a bar: its value ("0.0" for a zero result), "n/a" where the run has no result."""
    return "n/a" if value is None else f"{value:.1f}"


def write_chart_matplotlib(runs: Sequence[RunReport], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names, benches, values = _chart_data(runs)
    width = 0.8 / max(1, len(names))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(benches) * max(1, len(names)) ** 0.5 + 2), 4.5))
    for i, (name, vals) in enumerate(zip(names, values, strict=True)):
        xs = [j + i * width - 0.4 + width / 2 for j in range(len(benches))]
        bars = ax.bar(xs, [v if v is not None else 0.0 for v in vals], width=width, label=name)
        for x, bar, v in zip(xs, bars, vals, strict=True):  # every bar carries its value; a missing one says so
            if v is None:
                bar.set_visible(False)
            ax.annotate(bar_label(v), (x, (v or 0.0) + 1), ha="center", va="bottom", fontsize="x-small", rotation=90)
    ax.set_xticks(range(len(benches)), benches, rotation=35, ha="right")
    ax.set(xlabel="benchmark", ylabel="official primary metric (%)", ylim=(0, 110))
    ax.legend(fontsize="small")
    fig.tight_layout()
    with atomic_path(path, keep_suffix=True) as tmp:
        fig.savefig(tmp, dpi=120)
    plt.close(fig)


def _png_bytes(width: int, height: int, pixels: bytearray) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    stride = width * 3
    raw = b"".join(b"\x00" + bytes(pixels[y * stride : (y + 1) * stride]) for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def write_chart_stdlib(runs: Sequence[RunReport], path: Path) -> None:
    """Grouped bars (one colour per run, in table order), gridlines every 20 %, no text; a zero result is a dark stub
    under the axis, a missing result nothing."""
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
            if h == 0:  # a zero result: a dark stub below the axis, so it never looks like a missing result
                fill(x0, base + 1, x0 + bar_w - 1, base + 5, (40, 40, 40))
    fill(margin, base, width - margin, base + 1, (0, 0, 0))
    atomic_bytes(path, _png_bytes(width, height, px))


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
    notes = [
        f"- {md_text(name)} / {md_text(b)}: {md_text(n)}"
        for name, run in zip(_unique_names(runs), runs, strict=True)
        for b, s in sorted(run.summaries.items())
        for n in s.notes
    ]
    md = "# evr1-eval report\n\n" + verification_markdown(runs)
    warnings = "".join(f"- {md_text(w)}\n" for w in settings_warnings(runs))
    if warnings:
        md += f"**Warning: the compared runs used different settings**\n\n{warnings}\n"
    md += (
        "Cells: the official protocol's primary metric (the benchmark's own scoring, headline) · evr1: evr1-rewards' "
        "accuracy of the same answers. Metrics are percentages.\n\n" + markdown_table(runs)
    )
    md += "\n" + manifests_markdown(runs)
    refs = sorted({(b, s.reference) for run in runs for b, s in run.summaries.items() if s.reference})
    if refs:
        md += "\n## Official references\n\n" + "".join(f"- {md_text(b)}: {_md_reference(ref)}\n" for b, ref in refs)
    md += "\n## Notes\n\n" + "\n".join(notes) + "\n" if notes else ""
    delta = delta_knowledge(runs)
    if delta:
        md += "\n" + _delta_markdown(delta)
    atomic_text(out_dir / "report.md", md)
    write_json_atomic(out_dir / "summary.json", summary_json(runs))
    written = {"markdown": str(out_dir / "report.md"), "summary": str(out_dir / "summary.json")}
    if chart != "none":
        written["chart_backend"] = write_chart(runs, out_dir / "chart.png", backend=chart)
        written["chart"] = str(out_dir / "chart.png")
    return written
