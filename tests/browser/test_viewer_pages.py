"""The evr1 viewer in a real browser (headless Chromium): pages open from the file system with no request outside
their folder and no console error (CSP included); the DOM shows the right samples, filters and search change the
rows, frame strips hold exactly the cached frames with their timestamps, side by side shows both runs' responses,
and model output stays text. Screenshots of every page are saved (see conftest.py for where).

Sites: the shipped demo (60 evaluation samples x 2 runs + a training run, `evr1_cache.viewer.testing`), a real
`evr1-eval run` (fake backend) -> `evr1-eval report --html`, and real rollout dumps -> `evr1-train view`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from evr1_cache.viewer.testing import BENCHMARKS, demo_cache, demo_eval_runs, demo_train_run

from .conftest import read_index, script


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from evr1_cache.viewer import write_site

    work = tmp_path_factory.mktemp("demo")
    cache, videos = demo_cache(work, n_videos=4)
    base, rl = demo_eval_runs(cache, videos, n=60)
    write_site([base, rl, demo_train_run(cache, videos)], work / "site", title="evr1 viewer demo")
    return work / "site"


def _run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{cmd[:2]} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def report_site(dataset: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two `evr1-eval run`s with the console script (fake backend, frames cached by the run) + `report --html`."""
    work = tmp_path_factory.mktemp("report")
    common = ["--model", "fake", "--backend", "fake", "--benchmarks", dataset.benchmark, "--no-progress",
              "--annotations-dir", str(dataset.ann_dir), "--media-root", str(dataset.media),
              "--cache-dir", str(work / "cache"), "--write-cache", "--sampling", "fps=4", "--sampling",
              "max_pixels=3136", "--sampling", "min_pixels=784"]  # fmt: skip
    eval_cli = script("evr1-eval")
    _run([eval_cli, "run", *common, "--out", str(work / "base"), "--engine-kwargs", json.dumps({"response": "B"})])
    rl = {"response": "<answer>A</answer>", "responses": {"q3": "I'd say <b>B</b>"}}
    _run([eval_cli, "run", *common, "--out", str(work / "rl"), "--engine-kwargs", json.dumps(rl)])
    # no --annotations-dir etc.: the viewer reads them from the command line each run recorded
    out = _run([eval_cli, "report", str(work / "base"), str(work / "rl"), "--out", str(work / "rep"), "--chart",
                "none", "--html", str(work / "site")])  # fmt: skip
    assert f"open {(work / 'site' / 'index.html').resolve()}" in out
    return work / "site"


@pytest.fixture(scope="module")
def rollout_site(dataset: Any, cache_build: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Rollout dumps of the cross-package training file (cache built by `evr1-cache build`) -> `evr1-train view`."""
    from evr1_cache.spec import ImageSpec, SamplingSpec
    from evr1_train.rollouts.view import main
    from evr1_train.rollouts.writer import DumpConfig, RolloutDumpWriter, group_record, media_records

    work = tmp_path_factory.mktemp("rollouts")
    cache_build(
        dataset.train_file, work / "cache", *"--fps 4 --min-pixels 3136 --max-pixels 12544 --max-frames 6".split()
    )
    spec = SamplingSpec(fps=4.0, min_pixels=3136, max_pixels=12544, max_frames=6)
    rows = [json.loads(line) for line in dataset.train_file.read_text().splitlines()]
    writer = RolloutDumpWriter(work / "run" / "rollouts", DumpConfig(enable=True, every_n_steps=1), engine="local",
                               cache_dir=str(work / "cache"))  # fmt: skip
    writer.start(1)
    for step in (1, 2, 3):
        groups = []
        for row in rows:
            video = str(dataset.root / row["videos"][0])
            messages = [{"role": "user", "content": [{"type": "video", "video": video},
                                                     {"type": "text", "text": "What does the video show?"}]}]  # fmt: skip
            responses = [{"text": f"<answer>{'A' if k < step else 'B'}</answer>", "offline": k == 3,
                          "reward": {"overall": 0.1 + 0.9 * (k < step), "accuracy": float(k < step), "format": 1.0},
                          "advantage": 0.0, "tokens": 3} for k in range(4)]  # fmt: skip
            groups.append(group_record(engine="local", uid=f"{step}-{row['problem_id']}", row_id=row["problem_id"],
                                       task="what", data_source="toy", problem_type="multiple choice",
                                       messages=messages, ground_truth="A",
                                       media=media_records(messages, str(work / "cache"), spec, ImageSpec()),
                                       responses=responses, max_chars=2000))  # fmt: skip
        writer.write_step(step, groups)
    assert main([str(work / "run"), "--out", str(work / "site")]) == 0
    return work / "site"


# -- the demo site -----------------------------------------------------------------------------------------------------
def test_overview_lists_runs_comparisons_and_curves(demo: Path, open_page: Any) -> None:
    p = open_page(demo)
    page = p.open("index.html")
    assert page.locator("section.run").count() == 3
    assert page.locator("a.go[href='base-vs-rl-step200.html']").count() == 1
    charts = page.locator("svg.chart")
    assert charts.count() == 2
    assert charts.nth(0).locator("g.series").count() == 4  # all + 3 tasks
    assert page.locator("svg.chart circle").count() == 2 * 4 * 4  # 2 metrics x 4 series x 4 dumped steps
    p.shot("overview", full=True)


def test_browse_counts_pages_and_filters(demo: Path, open_page: Any) -> None:
    p = open_page(demo)
    page = p.open("base.html")
    idx = read_index(demo, "base")
    assert page.locator("#count").inner_text() == "Showing 1–25 of 60 samples"
    assert page.locator("article.card").count() == 25
    p.shot("browse-eval")
    page.click("#next")
    p.wait("document.getElementById('pageinfo').textContent === 'page 2 / 3'")
    page.click("#next")
    p.wait("document.getElementById('pageinfo').textContent === 'page 3 / 3'")
    assert page.locator("article.card").count() == 10
    assert page.locator("#next").is_disabled()
    wrong = sum(row[4] == "wrong" for row in idx["rows"])
    page.select_option("select[data-name=verdict]", "wrong")
    p.wait(f"document.getElementById('count').dataset.matches === '{wrong}'")
    assert page.locator("#pageinfo").inner_text() == "page 1 / 2"  # a filter goes back to page 1
    cards = page.locator("article.card")
    assert cards.count() == min(25, wrong)
    assert cards.count() == page.locator("article.card.v-wrong").count()
    assert "verdict=wrong" in page.url
    page.select_option("select[data-name=benchmark]", "mvbench")
    both = sum(row[4] == "wrong" and row[1] == "mvbench" for row in idx["rows"])
    p.wait(f"document.getElementById('count').dataset.matches === '{both}'")
    assert set(page.locator("article.card .chip[data-f=benchmark]").all_inner_texts()) == {"mvbench"}
    p.shot("browse-eval-filtered")
    page.select_option("select[data-name=error]", "error")
    errors = sum(row[4] == "wrong" and row[1] == "mvbench" and row[5] == "error" for row in idx["rows"])
    p.wait(f"document.getElementById('count').dataset.matches === '{errors}'")
    assert errors == 0
    assert page.locator(".empty-state").inner_text() == "No sample matches these filters."
    page.click("#reset")
    p.wait("document.getElementById('count').dataset.matches === '60'")
    page.select_option("select[data-name=error]", "error")
    n_errors = sum(row[5] == "error" for row in idx["rows"])
    assert n_errors == 2
    p.wait(f"document.getElementById('count').dataset.matches === '{n_errors}'")
    reason = page.locator("article.card .error-reason").first.inner_text()
    assert "moov atom not found" in reason
    p.shot("browse-eval-errors")


def test_hash_state_and_search(demo: Path, open_page: Any) -> None:
    p = open_page(demo)
    page = p.open("base.html", "#problem_type=numerical")
    assert page.locator("select[data-name=problem_type]").input_value() == "numerical"
    assert page.locator("#count").get_attribute("data-matches") == "20"
    page.click("#reset")
    p.wait("document.getElementById('count').dataset.matches === '60'")
    page.keyboard.press("/")
    page.keyboard.type("line 119 of the narration")  # only the long-subtitle prompts contain it
    p.wait("document.getElementById('count').dataset.matches === '4'")
    keys = page.locator("article.card").evaluate_all("cs => cs.map(c => c.dataset.key)")
    benches = list(BENCHMARKS)
    assert keys == [f"{benches[i % len(benches)]}/{i}" for i in range(60) if i % 17 == 3]
    assert page.locator("article.card details.prompt").count() == 4  # long prompts are folded
    p.shot("browse-eval-search")
    page.fill("#q", "mvbench-0021")
    p.wait("document.getElementById('count').dataset.matches === '1'")
    page.fill("#q", "no such text anywhere")
    p.wait("document.getElementById('count').dataset.matches === '0'")


def test_frame_strip_holds_the_cached_frames_with_timestamps(demo: Path, open_page: Any) -> None:
    import re

    from evr1_cache.reader import CacheReader
    from evr1_cache.viewer.testing import DEMO_SPEC

    p = open_page(demo)
    page = p.open("base.html")
    card = page.locator("article.card[data-key='mvbench/1']")
    strip = card.locator("figure.strip")
    source = strip.locator(".src").get_attribute("title")
    cache = demo.parent / "cache"
    _, meta = CacheReader(cache).load(source, DEMO_SPEC)
    imgs = strip.locator("img")
    assert imgs.count() == len(meta.frames_indices) == int(strip.get_attribute("data-frames"))
    assert strip.locator(".ts").all_inner_texts() == [f"{t:.1f}s" for t in meta.timestamps]
    titles = imgs.evaluate_all("is => is.map(i => i.title)")
    assert [int(re.search(r"frame (\d+)", t).group(1)) for t in titles] == list(meta.frames_indices)
    card.scroll_into_view_if_needed()
    p.wait(
        "[...document.querySelector(\"article.card[data-key='mvbench/1'] figure.strip\").querySelectorAll('img')]"
        ".every(i => i.complete && i.naturalWidth > 0)"
    )
    sizes = imgs.evaluate_all("is => is.map(i => [i.naturalWidth, i.naturalHeight])")
    assert all(max(w, h) <= 160 for w, h in sizes)  # downscaled thumbnails, not the frames
    p.shot("card-eval", element=card)


def test_side_by_side_lists_changed_verdicts_first(demo: Path, open_page: Any) -> None:
    p = open_page(demo)
    page = p.open("base-vs-rl-step200.html")
    idx = read_index(demo, "base-vs-rl-step200")
    changed = sum(" → " in row[4] for row in idx["rows"])
    assert 25 < changed < 50
    cards = page.locator("article.card")
    flags = "cs => cs.map(c => c.classList.contains('changed'))"
    assert cards.evaluate_all(flags) == [True] * 25
    page.click("#next")
    p.wait("document.getElementById('pageinfo').textContent === 'page 2 / 3'")
    assert cards.evaluate_all(flags) == [True] * (changed - 25) + [False] * (50 - changed)
    page.click("#prev")
    p.wait("document.getElementById('pageinfo').textContent === 'page 1 / 3'")
    first = cards.first
    assert first.locator(".side").count() == 2
    assert first.locator(".side-title").all_inner_texts() == ["base", "rl-step200"]
    texts = first.locator(".side pre.resp").all_inner_texts()
    assert len(texts) == 2
    assert all("<answer>" in t for t in texts)
    assert first.locator(".side-1 .badge").inner_text() != first.locator(".side-2 .badge").inner_text()
    p.shot("compare")
    page.select_option("select[data-name=verdict]", "wrong → correct")
    want = sum(row[4] == "wrong → correct" for row in idx["rows"])
    p.wait(f"document.getElementById('count').dataset.matches === '{want}'")
    p.shot("compare-improved")


def test_model_output_stays_text(demo: Path, open_page: Any) -> None:
    p = open_page(demo)
    page = p.open("rl-step200.html", "#q=__pwned")
    p.wait("document.getElementById('count').dataset.matches === '1'")
    resp = page.locator("article.card pre.resp")
    assert "<script>window.__pwned = 1</script>" in resp.inner_text()
    assert resp.locator("script, img").count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert resp.locator("mark.answer").inner_text() == "B"
    p.shot("hostile-response")


def test_training_groups_offline_online_and_steps(demo: Path, open_page: Any) -> None:
    p = open_page(demo)
    page = p.open("quickstart.html")
    assert page.locator("#count").inner_text() == "Showing 1–24 of 24 prompt groups"
    first = page.locator("article.card").first
    assert first.locator("section.response").count() == 4
    assert first.locator(".response .src-badge").all_inner_texts() == ["ONLINE", "ONLINE", "ONLINE", "OFFLINE"]
    assert first.locator("dl.scores .adv dd").count() == 4
    p.shot("browse-train")
    page.select_option("select[data-name=source]", "offline")
    p.wait("document.body.dataset.source === 'offline'")
    opacity = first.locator(".response[data-source=online]").first.evaluate("e => getComputedStyle(e).opacity")
    assert float(opacity) < 0.5  # online responses are dimmed, offline ones stand out
    page.select_option("select[data-name=step]", "40")
    p.wait("document.getElementById('count').dataset.matches === '6'")
    assert set(page.locator("article.card .chip[data-f=step]").all_inner_texts()) == {"step 40"}
    p.shot("browse-train-step40-offline")


# -- real flows ------------------------------------------------------------------------------------------------------
def test_report_html_of_real_eval_runs(report_site: Path, open_page: Any) -> None:
    p = open_page(report_site)
    page = p.open("base-vs-rl.html")
    assert page.locator("#count").inner_text() == "Showing 1–4 of 4 samples"
    cards = page.locator("article.card")
    # base answered B (wrong) everywhere; rl answered A except q3: three flips, listed first
    assert cards.evaluate_all("cs => cs.map(c => c.dataset.key)")[-1] == "mvbench/q3"
    assert cards.evaluate_all("cs => cs.map(c => c.classList.contains('changed'))") == [True, True, True, False]
    q3 = page.locator("article.card[data-key='mvbench/q3']")
    assert "I'd say <b>B</b>" in q3.locator(".side-2 pre.resp").inner_text()  # shown as text
    assert q3.locator(".side-2 pre.resp b").count() == 0
    for card in cards.all():
        n = int(card.locator("figure.strip").get_attribute("data-frames"))
        assert n > 0
        assert card.locator("figure.strip img").count() == n
    p.shot("report-compare", full=True)
    page = p.open("index.html")
    assert page.locator("table.grid").first.locator("tbody tr").count() == 1
    p.shot("report-overview", full=True)


def test_rollout_viewer_of_dumps(rollout_site: Path, open_page: Any) -> None:
    p = open_page(rollout_site)
    page = p.open("run.html")
    assert page.locator("#count").inner_text() == "Showing 1–9 of 9 prompt groups"
    assert page.locator("select[data-name=step] option").count() == 4
    for card in page.locator("article.card").all():
        strip = card.locator("figure.strip")
        assert strip.locator("img").count() == int(strip.get_attribute("data-frames")) > 0
    p.shot("rollouts", full=True)
    page = p.open("index.html")
    assert page.locator("svg.chart").count() == 2
    p.shot("rollouts-overview", full=True)
