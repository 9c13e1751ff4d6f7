"""The viewer's site writer: thumbnails are the cached frames, pages are self-contained and model output stays text.

The browser half (DOM, filters, screenshots in headless Chromium) is `nox -s viewer_browser`; this file checks the
files written, without a browser.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from evr1_cache.reader import CacheReader
from evr1_cache.viewer import MediaRef, ResponseRecord, RunRecord, SampleRecord, write_site
from evr1_cache.viewer.charts import line_chart
from evr1_cache.viewer.records import Curve
from evr1_cache.viewer.testing import DEMO_SPEC, HOSTILE, demo_cache, demo_eval_runs, demo_train_run, media_ref
from evr1_cache.viewer.text import answer_span, split_answer
from evr1_cache.viewer.thumbs import ThumbnailWriter

pytest.importorskip("jinja2")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    return demo_cache(tmp_path_factory.mktemp("viewer"), n_videos=3)


def _index(site: Path, slug: str) -> dict:
    text = (site / "data" / slug / "index.js").read_text()
    return json.loads(text[len("EVR1.index(") : -len(");\n")])


def _chunk(site: Path, slug: str, n: int = 0) -> list:
    text = (site / "data" / slug / f"chunk-{n:05d}.js").read_text()
    return json.loads(text[text.index(",") + 1 : -len(");\n")])


def test_importing_the_viewer_is_light() -> None:
    code = (
        "import sys, evr1_cache.viewer\n"
        "bad = {'jinja2', 'PIL', 'numpy', 'safetensors', 'av'} & {m.split('.')[0] for m in sys.modules}\n"
        "assert not bad, bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize(
    ("text", "extracted", "marked"),
    [
        ("I think (A) a digit", "A", "A"),  # the option letter, never the article "a"
        ("x <answer>C</answer> y <answer>D</answer>", "D", "D"),  # the last answer block counts
        ("<answer> 12.5 </answer>", "12.5", "12.5"),
        ("The answer is 3, not 13", "3", "3"),  # whole word: not the 3 of 13
        ("<answer>B</answer>", None, "B"),  # nothing extracted: the answer block's content
        ("no answer here", "Z", ""),  # cannot be located: no highlight
        ("", "A", ""),
    ],
)
def test_answer_highlight(text: str, extracted: str | None, marked: str) -> None:
    before, mark, after = split_answer(text, extracted)
    assert mark == marked
    assert before + mark + after == text
    if marked == "3":
        assert answer_span(text, extracted) == (14, 15)


def test_verdicts_of_samples() -> None:
    def s(*marks: bool | None, error: str | None = None) -> SampleRecord:
        return SampleRecord(key="k", label="k", responses=tuple(ResponseRecord(text="t", correct=m) for m in marks),
                            error=error)  # fmt: skip

    assert s(True, True).verdict == "correct"
    assert s(False).verdict == "wrong"
    assert s(True, False).verdict == "mixed"
    assert s(None).verdict == "unscored"
    assert s(True, error="media: gone").verdict == "error"


def test_chart_draws_every_point_and_a_legend() -> None:
    curves = [Curve(metric="reward", series=t, points=((1, 0.1), (2, 0.5), (3, float("nan")))) for t in ("all", "a")]
    svg = line_chart("reward", curves, unit_range=True)
    assert svg.startswith("<svg")
    assert svg.endswith("</svg>")
    assert svg.count("<circle") == 4  # NaN points are dropped
    assert 'data-series="all"' in svg
    assert 'data-series="a"' in svg
    assert line_chart("empty", []) == ""


def test_thumbnails_are_the_cached_frames_downscaled_once(demo: tuple[Path, list[Path]], tmp_path: Path) -> None:
    cache, videos = demo
    ref = media_ref(cache, videos[1])
    frames, meta = CacheReader(cache).load(videos[1], DEMO_SPEC)
    writer = ThumbnailWriter(tmp_path)
    strip = writer.strip(ref)
    assert len(strip.images) == frames.shape[0] == len(meta.frames_indices)
    assert strip.frame_indices == tuple(meta.frames_indices)
    assert strip.timestamps == tuple(round(t, 3) for t in meta.timestamps)
    assert strip.note is None
    for i, rel in enumerate(strip.images):
        assert rel is not None
        thumb = np.asarray(Image.open(tmp_path / rel).convert("RGB"), dtype=np.float32)
        diffs = []
        for frame in frames:
            want = Image.fromarray(frame)
            want.thumbnail((thumb.shape[1], thumb.shape[0]), Image.Resampling.LANCZOS)
            diffs.append(float(np.abs(thumb - np.asarray(want, dtype=np.float32)).mean()))
        # thumbnail i is frame i of the entry (JPEG noise only), clearly unlike every other frame of the clip
        assert diffs[i] < 6, (i, diffs)
        assert min(d for j, d in enumerate(diffs) if j != i) > 12, (i, diffs)
    assert (writer.written, writer.reused) == (1, 0)
    again = ThumbnailWriter(tmp_path)
    assert again.strip(ref) == strip
    assert (again.written, again.reused) == (0, 1)  # downscaled once, reused by a later site build


def test_strip_notes_say_why_frames_are_missing_or_differ(demo: tuple[Path, list[Path]], tmp_path: Path) -> None:
    cache, videos = demo
    ref = media_ref(cache, videos[0])
    writer = ThumbnailWriter(tmp_path)
    gone = writer.strip(MediaRef(kind="video", source="x.mp4", cache_root=str(cache), cache_file="videos/zz/0/none.safetensors",
                                 frame_indices=(0, 4), timestamps=(0.0, 0.5)))  # fmt: skip
    assert gone.images == (None, None)
    assert gone.timestamps == (0.0, 0.5)
    assert "not found" in (gone.note or "")
    uncached = writer.strip(MediaRef(kind="video", source="x.mp4", frame_indices=(0,), timestamps=(0.0,)))
    assert uncached.images == (None,)
    assert "not in the frame cache" in (uncached.note or "")
    shifted = writer.strip(MediaRef(kind="video", source=ref.source, cache_root=ref.cache_root,
                                    cache_file=ref.cache_file, frame_indices=tuple(i + 1 for i in ref.frame_indices)))  # fmt: skip
    assert "rebuilt" in (shifted.note or "")
    escape = writer.strip(MediaRef(kind="video", source="x", cache_root=str(cache), cache_file="../../../etc/passwd"))
    assert escape.images == ()
    assert "not an entry inside" in (escape.note or "")
    broken = tmp_path / "broken" / "videos" / "a" / "b"
    broken.mkdir(parents=True)
    (broken / "bad.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}garbage")
    bad = writer.strip(
        MediaRef(kind="video", source="x", cache_root=str(tmp_path / "broken"), cache_file="videos/a/b/bad.safetensors")
    )
    assert "unreadable" in (bad.note or "")


def test_site_is_self_contained_and_escapes_model_output(demo: tuple[Path, list[Path]], tmp_path: Path) -> None:
    cache, videos = demo
    base, rl = demo_eval_runs(cache, videos, n=40)
    train = demo_train_run(cache, videos, steps=(1, 5), groups=3, n=4)
    site = tmp_path / "site"
    result = write_site([base, rl, train], site, title="t", page_size=10, chunk_size=16)
    assert result.samples == 40 + 40 + 6
    assert {p.name for p in result.pages} == {"index.html", "base.html", "rl-step200.html", "quickstart.html",
                                              "base-vs-rl-step200.html"}  # fmt: skip
    idx = _index(site, "base")
    assert idx["total"] == 40
    assert len(idx["rows"]) == 40
    assert idx["chunks"] == 3
    assert {f["name"] for f in idx["filters"]} >= {"benchmark", "task", "problem_type", "verdict", "error"}
    cmp = _index(site, "base-vs-rl-step200")
    changed = [" → " in row[4] for row in cmp["rows"]]
    assert any(changed)
    assert changed == sorted(changed, reverse=True)
    assert _index(site, "quickstart")["filters"][-1]["name"] == "step"
    sources = next(f for f in _index(site, "quickstart")["filters"] if f["name"] == "source")
    assert sources["multi"]
    assert [v for v, _ in sources["values"]] == ["offline", "online"]
    # model output is text: the hostile response is escaped in its card, never markup
    cards = [c for n in range(3) for c in _chunk(site, "rl-step200", n)[0]]
    hostile = next(c for c in cards if "__pwned" in c)
    assert "<script>" not in hostile
    assert "&lt;script&gt;" in hostile
    assert '<img src="x"' not in hostile
    assert HOSTILE.count("<") == 5
    # self-contained: no URL outside the folder, CSP forbids inline script, every referenced file exists
    for path in site.rglob("*"):
        if path.suffix in (".html", ".js", ".css"):
            text = path.read_text()
            assert not re.search(r"(?:src|href)=\"(?:https?:)?//", text), path
            assert "http://" not in text.replace("http://www.w3.org/2000/svg", ""), path
            assert "https://" not in text, path
    page = (site / "base.html").read_text()
    assert "script-src 'self'" in page
    assert "<script>" not in page
    for ref in re.findall(r'(?:src|href)="([^"#]+)"', page):
        assert (site / ref).exists(), ref
    thumbs = [c for c in _chunk(site, "base")[0] for c in re.findall(r'src="(thumbs/[^"]+)"', c)]
    assert thumbs
    assert all((site / t).is_file() for t in thumbs)
    overview = (site / "index.html").read_text()
    assert overview.count("<svg") == 2
    assert "base-vs-rl-step200.html" in overview


def test_rewriting_a_site_replaces_stale_data(demo: tuple[Path, list[Path]], tmp_path: Path) -> None:
    cache, videos = demo
    big, _ = demo_eval_runs(cache, videos, n=30)
    small = RunRecord(name=big.name, kind="eval", samples=big.samples[:5])
    write_site([big], tmp_path, chunk_size=10)
    assert len(list((tmp_path / "data" / "base").glob("chunk-*.js"))) == 3
    result = write_site([small], tmp_path, chunk_size=10)
    assert len(list((tmp_path / "data" / "base").glob("chunk-*.js"))) == 1
    assert result.thumbnails_written == 0
    assert result.thumbnails_reused >= 1
    with pytest.raises(ValueError, match="no runs"):
        write_site([], tmp_path)


def test_templates_and_assets_ship_inside_the_package() -> None:
    from importlib.resources import files

    root = files("evr1_cache.viewer")
    names = {p.name for p in (root / "templates").iterdir()} | {p.name for p in (root / "static").iterdir()}
    assert {"base.html.j2", "browse.html.j2", "card.html.j2", "compare_card.html.j2", "index.html.j2",
            "macros.html.j2", "viewer.css", "viewer.js"} <= names  # fmt: skip


def test_entry_frames_reads_the_header_only(demo: tuple[Path, list[Path]], tmp_path: Path) -> None:
    from evr1_cache.viewer import entry_frames

    cache, videos = demo
    ref = media_ref(cache, videos[2])
    assert entry_frames(cache / ref.cache_file) == (ref.frame_indices, tuple(round(t, 4) for t in ref.timestamps))
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(ValueError, match="not a readable video cache entry"):
        entry_frames(bad)
