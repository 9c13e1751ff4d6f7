"""Page weight and load time of the evr1 viewer for a 1,000-sample run, in headless Chromium.

Builds two evaluation runs of N samples over a real frame cache (generated clips, `evr1_cache.viewer.testing`), writes
the site (the first build writes the thumbnails, a rebuild reuses them), then opens the sample browser and the
side-by-side page and measures, from navigation start:
  * ready: the first page of cards rendered (the index and one chunk loaded, filters built);
  * images: every thumbnail of that page decoded;
  * filter / search: a verdict filter and a first search (which loads every chunk's text);
  * weight: bytes of every file the page requested (HTML, CSS, JS, index, chunks, thumbnails).
Baseline, measured in the same run: the same cards on one static page (what a plain template loop produces).

Needs Playwright and Chromium; run it in the browser-test venv:
    uvx nox -s viewer_browser -- -x          # creates .nox/viewer_browser once
    .nox/viewer_browser/bin/python benchmarks/viewer_pages.py [--samples 1000] [--videos 100] [--frames 16]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

CHROMIUM = os.environ.get("EVR1_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
        *(["--no-sandbox"] if os.geteuid() == 0 else [])]  # fmt: skip


def build(work: Path, samples: int, videos: int, frames: int) -> tuple[Path, dict[str, float]]:
    from evr1_cache.spec import SamplingSpec
    from evr1_cache.viewer import testing as demo
    from evr1_cache.viewer import write_site

    # frames the size a 7B model sees at a modest budget (~224x150), `frames` per clip at 4 fps
    spec = SamplingSpec(fps=4.0, min_frames=4, max_frames=frames, min_pixels=56 * 56, max_pixels=224 * 224)
    t0 = time.perf_counter()
    cache, clips = demo.demo_cache(work, n_videos=videos, spec=spec, seconds=frames / 4)
    t_cache = time.perf_counter() - t0
    base, rl = demo.demo_eval_runs(cache, clips, n=samples, spec=spec)
    site = work / "site"
    shutil.rmtree(site, ignore_errors=True)  # the first build writes every thumbnail
    t0 = time.perf_counter()
    first = write_site([base, rl], site)
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = write_site([base, rl], site)
    t_again = time.perf_counter() - t0
    assert again.thumbnails_written == 0
    assert again.thumbnails_reused == first.thumbnails_written
    baseline = site / "baseline.html"
    cards = []
    import json

    for chunk in sorted((site / "data" / "base").glob("chunk-*.js")):
        text = chunk.read_text()
        cards += json.loads(text[text.index(",") + 1 : -len(");\n")])[0]
    page = (site / "base.html").read_text()
    head = page[: page.index("<main>")]
    baseline.write_text(f"{head}<main><div class='cards'>{''.join(cards)}</div></main></body></html>")
    size = sum(p.stat().st_size for p in site.rglob("*") if p.is_file()) - baseline.stat().st_size
    thumbs = sum(p.stat().st_size for p in (site / "thumbs").rglob("*.jpg"))
    return site, {"cache_s": t_cache, "first_build_s": t_first, "rebuild_s": t_again, "site_mb": size / 2**20,
                  "thumbs_mb": thumbs / 2**20, "thumb_sets": first.thumbnails_written}  # fmt: skip


def measure(browser: object, site: Path, name: str, *, wait_ready: bool = True) -> dict[str, float]:
    page = browser.new_page(viewport={"width": 1360, "height": 900})  # type: ignore[attr-defined]
    requested: list[str] = []
    page.on("requestfinished", lambda r: requested.append(r.url))
    t0 = time.perf_counter()
    page.goto(f"file://{site}/{name}", wait_until="load")
    if wait_ready:
        while not page.evaluate("document.body.dataset.ready === '1'"):
            time.sleep(0.005)
    ready = time.perf_counter() - t0
    js_images = "[...document.querySelectorAll('#cards img, .cards img')].slice(0, 400)"
    while not page.evaluate(f"{js_images}.every(i => !i.loading || i.getBoundingClientRect().top > innerHeight "
                            "|| (i.complete && i.naturalWidth > 0))"):  # fmt: skip
        time.sleep(0.005)
    images = time.perf_counter() - t0
    out = {"ready_ms": ready * 1000, "images_ms": images * 1000}
    out["requests"], out["weight_kb"] = _weight(requested)  # what opening the page costs
    if wait_ready:

        def timed(action: object) -> float:
            page.evaluate("document.body.dataset.ready = ''")  # render() sets it back when the cards are shown
            t1 = time.perf_counter()
            action()  # type: ignore[operator]
            while page.evaluate("document.body.dataset.ready") != "1":
                time.sleep(0.002)
            return (time.perf_counter() - t1) * 1000

        out["filter_ms"] = timed(lambda: page.select_option("select[data-name=verdict]", index=1))
        page.click("#reset")
        page.wait_for_timeout(50)
        out["first_search_ms"] = timed(lambda: page.fill("#q", "narration"))  # loads every chunk's text first
    out["all_requests"], out["all_weight_kb"] = _weight(requested)  # after a filter and a search
    page.close()
    return out


def _weight(urls: list[str]) -> tuple[float, float]:
    """(distinct files requested, their total size in KiB): file:// responses carry no transfer size."""
    files = {Path(unquote(urlparse(u).path)) for u in urls}
    return float(len(files)), sum(p.stat().st_size for p in files if p.is_file()) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--videos", type=int, default=100, help="distinct clips (questions share clips, as in benchmarks)")
    ap.add_argument("--frames", type=int, default=16, help="frames per clip the model saw")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="write the site here instead of a temp folder")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    work = args.keep or Path(tempfile.mkdtemp(prefix="evr1-viewer-bench-"))
    site, built = build(work, args.samples, args.videos, args.frames)
    load = os.getloadavg()[0]
    print(f"{args.samples} samples x 2 runs, {args.videos} clips x <= {args.frames} frames; load average {load:.2f}")
    print(f"frame cache {built['cache_s']:.1f} s; site: first build {built['first_build_s']:.1f} s "
          f"({built['thumb_sets']} thumbnail sets), rebuild {built['rebuild_s']:.1f} s (thumbnails reused: "
          f"{built['first_build_s'] / max(built['rebuild_s'], 1e-9):.1f}x faster); on disk {built['site_mb']:.1f} MiB "
          f"({built['thumbs_mb']:.1f} MiB thumbnails)")  # fmt: skip
    results: dict[str, list[dict[str, float]]] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for _ in range(args.repeat):
            for name, ready in (("base.html", True), ("base-vs-rl-step200.html", True), ("baseline.html", False)):
                results.setdefault(name, []).append(measure(browser, site, name, wait_ready=ready))
        browser.close()
    med = {n: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for n, rs in results.items()}
    print(f"\n{'page (median of ' + str(args.repeat) + ')':<28}{'ready ms':>9}{'images ms':>10}{'requests':>9}"
          f"{'KiB':>7}{'filter ms':>10}{'search ms*':>11}{'KiB after':>10}")  # fmt: skip
    for name, m in med.items():
        print(f"{name:<28}{m['ready_ms']:>9.0f}{m['images_ms']:>10.0f}{m['requests']:>9.0f}{m['weight_kb']:>7.0f}"
              f"{m.get('filter_ms', float('nan')):>10.0f}{m.get('first_search_ms', float('nan')):>11.0f}"
              f"{m['all_weight_kb']:>10.0f}")  # fmt: skip
    print("* search includes the box's 150 ms typing debounce and loading every chunk's text on first use")
    b, v = med["baseline.html"], med["base.html"]
    print(
        f"\nsample browser vs one static page of all {args.samples} cards: load to images "
        f"{b['images_ms'] / v['images_ms']:.1f}x faster, {b['weight_kb'] / v['weight_kb']:.1f}x lighter"
    )
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"site kept: {site / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
