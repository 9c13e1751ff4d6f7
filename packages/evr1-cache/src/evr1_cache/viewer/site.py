"""Write the static site: an overview page, one sample browser per run, one side-by-side page per compared pair.

Why this shape: the site must open from the file system (no server, no CDN) and stay fast for runs of any size.
Browsers refuse `fetch()` on `file://`, but load `<script src>` files, so the data travels as small scripts: a light
index per page (the filter columns of every sample) and chunks of pre-rendered cards loaded on demand. The cards are
rendered by Jinja2 with autoescaping, and the pages forbid inline scripts (Content-Security-Policy), so a model's
output is always text, never markup. Thumbnails are written once per cache entry and shared by all pages.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evr1_cache.atomic import atomic_text
from evr1_cache.viewer.charts import line_chart
from evr1_cache.viewer.records import Curve, MediaRef, RunRecord, SampleRecord
from evr1_cache.viewer.text import clip, split_answer
from evr1_cache.viewer.thumbs import Strip, ThumbnailWriter

#: Cards per page of the sample browser, and per data chunk (a chunk is one script file loaded on demand).
PAGE_SIZE = 25
CHUNK_SIZE = 50
#: Characters of prompt / response kept in a card (a longer text is cut with a visible marker).
TEXT_LIMIT = 20_000
#: Characters of each sample's text searched by the search box.
SEARCH_LIMIT = 6_000

_FILTERS: tuple[tuple[str, str], ...] = (
    ("benchmark", "Benchmark"),
    ("task", "Task"),
    ("problem_type", "Problem type"),
    ("verdict", "Verdict"),
    ("error", "Errors"),
    ("source", "Offline / online"),
    ("step", "Step"),
)

#: Columns holding several space-separated values (a hybrid group holds offline and online responses).
_MULTI = frozenset({"source"})


@dataclass(frozen=True, slots=True)
class SiteResult:
    """What `write_site` wrote."""

    index: Path
    pages: tuple[Path, ...]
    samples: int
    thumbnails_written: int
    thumbnails_reused: int
    problems: tuple[str, ...] = ()


@dataclass(slots=True)
class _Page:
    """One sample browser page; cards stream to chunk files as they are rendered (memory holds one chunk)."""

    slug: str
    title: str
    kind: str  # "run" | "compare"
    runs: tuple[RunRecord, ...]
    data: Path
    chunk_size: int
    rows: list[list[Any]] = field(default_factory=list)
    chunks: int = 0
    _cards: list[str] = field(default_factory=list)
    _texts: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.data.exists():
            shutil.rmtree(self.data)  # rewritten whole: no stale chunk of an earlier, larger run survives
        self.data.mkdir(parents=True)

    def add(self, row: list[Any], card: str, text: str) -> None:
        self.rows.append(row)
        self._cards.append(card)
        self._texts.append(text)
        if len(self._cards) >= self.chunk_size:
            self.flush()

    def flush(self) -> None:
        if not self._cards and self.chunks:
            return
        payload = json.dumps([self._cards, self._texts], ensure_ascii=True, separators=(",", ":"))
        atomic_text(self.data / f"chunk-{self.chunks:05d}.js", f"EVR1.chunk({self.chunks},{payload});\n")
        self.chunks += 1
        self._cards, self._texts = [], []


def _environment() -> Any:
    try:
        import jinja2
    except ImportError as exc:  # the extra is missing: say which one
        raise ImportError("the evr1 viewer needs Jinja2: pip install 'evr1-cache[viewer]'") from exc
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("evr1_cache.viewer", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["stamp"] = _stamp
    env.globals["split_answer"] = split_answer
    env.globals["clip"] = lambda text, limit=TEXT_LIMIT: clip(text or "", limit)
    return env


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value:  # NaN
            return "–"
        return f"{value:.{digits}f}".rstrip("0").rstrip(".") if abs(value) < 1e6 else f"{value:.3g}"
    return str(value)


def _stamp(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds >= 60:
        m, s = divmod(seconds, 60)
        return f"{int(m)}:{s:04.1f}"
    return f"{seconds:.1f}s"


def slugify(name: str, taken: set[str]) -> str:
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", name).strip("-._").lower()[:48] or "run"
    slug, n = base, 2
    while slug in taken:
        slug, n = f"{base}-{n}", n + 1
    taken.add(slug)
    return slug


def write_site(
    runs: Sequence[RunRecord],
    out_dir: str | os.PathLike[str],
    *,
    title: str = "evr1 viewer",
    compare: bool = True,
    page_size: int = PAGE_SIZE,
    chunk_size: int = CHUNK_SIZE,
    workers: int | None = None,
) -> SiteResult:
    """Write the site for `runs` into `out_dir` (created; earlier pages there are replaced, thumbnails reused).

    With `compare` and two or more runs, the first run is the base and each other run gets a side-by-side page
    (samples matched by key, the ones whose verdict changed first).
    """
    if not runs:
        raise ValueError("nothing to show: no runs given")
    if page_size < 1 or chunk_size < 1:
        raise ValueError("page_size and chunk_size must be >= 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    env = _environment()
    thumbs = ThumbnailWriter(out)
    strips = _strips(runs, thumbs, workers)
    taken: set[str] = {"index", "assets", "data", "thumbs"}
    pages: list[_Page] = []
    for run in runs:
        slug = slugify(run.name, taken)
        page = _Page(slug, run.name, "run", (run,), out / "data" / slug, chunk_size)
        card = env.get_template("card.html.j2")
        for sample in run.samples:
            html = card.render(s=sample, strips=_strips_of(sample, strips), run=run, group=_group_stats(sample))
            page.add(_row(sample), _compact(html), _search_text(sample))
        page.flush()
        pages.append(page)
    comparisons: list[dict[str, Any]] = []
    if compare and len(runs) > 1:
        base = runs[0]
        for j, other in enumerate(runs[1:], 1):
            if other.kind != base.kind:  # an eval sample and a rollout group never share a key
                continue
            slug = slugify(f"{base.name}-vs-{other.name}", taken)
            page = _Page(
                slug, f"{base.name} vs {other.name}", "compare", (base, other), out / "data" / slug, chunk_size
            )
            stats = _compare(page, base, other, strips, env)
            page.flush()
            comparisons.append({"slug": page.slug, "base": base.name, "other": other.name, "run": j, **stats})
            pages.append(page)
    from importlib.resources import files

    for name in ("viewer.css", "viewer.js"):  # (atomic_text makes the folder)
        atomic_text(out / "assets" / name, (files("evr1_cache.viewer") / "static" / name).read_text(encoding="utf-8"))
    written = [_write_page(env, out, page, title, pages, page_size) for page in pages]
    overview = env.get_template("index.html.j2").render(
        title=title,
        runs=[_overview(run, page.slug) for run, page in zip(runs, pages, strict=False)],  # the runs' pages come first
        comparisons=comparisons,
        nav=_nav(pages, None),
        asset="assets",
    )
    index = out / "index.html"
    atomic_text(index, overview)
    return SiteResult(
        index=index,
        pages=(index, *written),
        samples=sum(len(r.samples) for r in runs),
        thumbnails_written=thumbs.written,
        thumbnails_reused=thumbs.reused,
    )


# -- pieces ----------------------------------------------------------------------------------------------------------
def _media_key(ref: MediaRef) -> tuple[Any, ...]:
    return (ref.kind, ref.source, ref.cache_root, ref.cache_file, ref.frame_indices, ref.timestamps, ref.note)


def _strips(runs: Sequence[RunRecord], thumbs: ThumbnailWriter, workers: int | None) -> dict[tuple[Any, ...], Strip]:
    refs: dict[tuple[Any, ...], MediaRef] = {}
    for run in runs:
        for sample in run.samples:
            for ref in sample.media:
                refs.setdefault(_media_key(ref), ref)
    n = workers or min(4, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=max(1, n)) as pool:
        done = list(pool.map(thumbs.strip, refs.values()))
    return dict(zip(refs, done, strict=True))


def _strips_of(sample: SampleRecord, strips: Mapping[tuple[Any, ...], Strip]) -> list[Strip]:
    return [strips[_media_key(ref)] for ref in sample.media]


def _row(a: SampleRecord, b: SampleRecord | None = None) -> list[Any]:
    """The filter columns of a card: one sample's, or a compared pair's (`b` the other run's: its verdict change,
    sources and step)."""
    b = a if b is None else b
    change = a.verdict if a.verdict == b.verdict else f"{a.verdict} → {b.verdict}"
    error = "error" if "error" in (a.verdict, b.verdict) else "no error"
    step = "" if b.step is None else str(b.step)
    return [a.key, a.benchmark, a.task, a.problem_type, change, error, _sources(b), step]


def _sources(sample: SampleRecord) -> str:
    """The kinds of responses a sample holds ("offline online" for a hybrid group): the filter matches any of them."""
    return " ".join(sorted({r.source for r in sample.responses if r.source is not None}))


_BETWEEN_TAGS = re.compile(r">\n\s*<")


def _compact(html: str) -> str:
    """Drop the template's line breaks + indentation between tags (a third of a card's bytes). Text never holds a
    raw `<` or `>` (autoescaped), so only markup is touched; cards lay out with flex/grid, so no visible gap is lost."""
    return _BETWEEN_TAGS.sub("><", html)


def _group_stats(sample: SampleRecord) -> dict[str, Any] | None:
    """Reward mean / spread of a group of rollouts; equal rewards mean zero advantages: no learning signal."""
    if len(sample.responses) < 2:
        return None
    rewards = [r.scores.get("overall", r.scores.get("score")) for r in sample.responses]
    vals = [float(v) for v in rewards if v is not None]
    if len(vals) < 2:
        return None
    mean = sum(vals) / len(vals)
    std = (sum((v - mean) ** 2 for v in vals) / len(vals)) ** 0.5
    return {"mean": mean, "std": std, "flat": std < 1e-9}


def _search_text(sample: SampleRecord) -> str:
    parts = [sample.label, sample.key, sample.prompt, sample.ground_truth, sample.error or ""]
    for r in sample.responses:
        parts += [r.text or "", r.extracted or "", r.error or ""]
    return " \n".join(parts).lower()[:SEARCH_LIMIT]


def _compare(
    page: _Page, base: RunRecord, other: RunRecord, strips: Mapping[tuple[Any, ...], Strip], env: Any
) -> dict[str, int]:
    """Fill a side-by-side page: samples present in both runs, changed verdicts first (then base order)."""
    theirs = {s.key: s for s in other.samples}
    pairs = [(s, theirs[s.key]) for s in base.samples if s.key in theirs]
    changed = [p for p in pairs if p[0].verdict != p[1].verdict]
    same = [p for p in pairs if p[0].verdict == p[1].verdict]
    card = env.get_template("compare_card.html.j2")
    for a, b in [*changed, *same]:
        html = card.render(a=a, b=b, sa=_strips_of(a, strips), sb=_strips_of(b, strips), base=base, other=other,
                           changed=a.verdict != b.verdict)  # fmt: skip
        page.add(_row(a, b), _compact(html), _search_text(a) + "\n" + _search_text(b))
    flips = Counter((a.verdict, b.verdict) for a, b in changed)
    return {
        "matched": len(pairs),
        "changed": len(changed),
        "improved": flips[("wrong", "correct")] + flips[("error", "correct")] + flips[("mixed", "correct")],
        "regressed": flips[("correct", "wrong")] + flips[("correct", "error")] + flips[("correct", "mixed")],
        "only_base": len(base.samples) - len(pairs),
        "only_other": len(other.samples) - len(pairs),
    }


def _filters(page: _Page) -> list[dict[str, Any]]:
    """The filters worth showing: columns with at least two distinct values (with their counts)."""
    out = []
    label = "Verdict change" if page.kind == "compare" else "Verdict"
    for col, (name, title) in enumerate(_FILTERS, 1):
        counts = Counter(v for row in page.rows for v in (row[col].split() if name in _MULTI else [row[col]]))
        counts.pop("", None)
        if len(counts) < 2:
            continue
        if name == "step":
            values = sorted(counts, key=lambda v: int(v))
        elif name == "verdict" and page.kind == "compare":
            values = sorted(counts, key=lambda v: (" → " not in v, v))
        else:
            values = sorted(counts)
        out.append(
            {"name": name, "label": label if name == "verdict" else title, "col": col, "multi": name in _MULTI,
             "values": [[v, counts[v]] for v in values]}
        )  # fmt: skip
    return out


def _write_page(env: Any, out: Path, page: _Page, title: str, pages: Sequence[_Page], page_size: int) -> Path:
    index = {
        "page": page.slug,
        "kind": page.kind,
        "base": f"data/{page.slug}",
        "page_size": page_size,
        "chunk_size": page.chunk_size,
        "chunks": page.chunks,
        "total": len(page.rows),
        "noun": ["prompt group", "prompt groups"] if page.runs[0].kind == "train" else ["sample", "samples"],
        "columns": ["key", *(name for name, _ in _FILTERS)],
        "filters": _filters(page),
        "rows": page.rows,
    }
    atomic_text(page.data / "index.js", f"EVR1.index({json.dumps(index, ensure_ascii=True, separators=(',', ':'))});\n")
    html = env.get_template("browse.html.j2").render(
        title=title,
        page=page,
        total=len(page.rows),
        filters=index["filters"],
        nav=_nav(pages, page.slug),
        asset="assets",
    )
    path = out / f"{page.slug}.html"
    atomic_text(path, html)
    return path


def _nav(pages: Sequence[_Page], current: str | None) -> list[dict[str, Any]]:
    return [{"href": f"{p.slug}.html", "title": p.title, "kind": p.kind, "current": p.slug == current} for p in pages]


def _overview(run: RunRecord, slug: str) -> dict[str, Any]:
    verdicts = Counter(s.verdict for s in run.samples)
    by: dict[str, dict[str, list[float]]] = {"benchmark": defaultdict(list), "task": defaultdict(list)}
    errors: dict[str, Counter[str]] = {"benchmark": Counter(), "task": Counter()}
    offline: dict[str, Counter[str]] = {"benchmark": Counter(), "task": Counter()}
    for s in run.samples:
        # a training run's tables count what its charts count: the sampled (online) responses; the stored (offline)
        # answers, correct by construction, are counted apart
        marks = [float(bool(r.correct)) for r in s.responses
                 if r.correct is not None and r.error is None and r.source != "offline"]  # fmt: skip
        for dim in ("benchmark", "task"):
            value = getattr(s, dim) or "–"
            by[dim][value].extend(marks)
            errors[dim][value] += s.verdict == "error"
            offline[dim][value] += sum(r.source == "offline" for r in s.responses)
    tables = {}
    for dim in ("benchmark", "task"):
        keys = sorted(set(by[dim]) | set(errors[dim]))
        if len(keys) > 1 or (keys and keys[0] != "–"):
            tables[dim] = [
                {"name": k, "n": len(by[dim][k]), "accuracy": _mean(by[dim][k]), "errors": errors[dim][k],
                 "offline": offline[dim][k]}
                for k in keys
            ]  # fmt: skip
    charts = []
    grouped: dict[str, list[Curve]] = defaultdict(list)
    for curve in run.curves:
        grouped[curve.metric].append(curve)
    for metric, curves in grouped.items():
        unit = any(w in metric for w in ("accuracy", "acc", "format"))
        charts.append(line_chart(f"{run.name}: {metric}", curves, unit_range=unit))
    return {
        "run": run,
        "slug": slug,
        "verdicts": dict(verdicts),
        "tables": tables,
        "charts": [c for c in charts if c],
        "steps": sorted({s.step for s in run.samples if s.step is not None}),
        "responses": sum(len(s.responses) for s in run.samples),
    }


def _mean(values: Iterable[float]) -> float | None:
    vals = list(values)
    return sum(vals) / len(vals) if vals else None
