"""`evr1-eval report --html`: two real runs (fake backend, generated clips, frame cache) become one viewer site whose
frames are the cache entries the runs used; broken or missing inputs become visible problems, never a crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evr1_cache.testing import make_synthetic_video
from evr1_eval.cli import main

pytest.importorskip("jinja2")

N = 6
SAMPLING = ["--sampling", "fps=4", "--sampling", "max_pixels=3136", "--sampling", "min_pixels=784"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("viewer_eval")
    clips = [make_synthetic_video(root / "media" / f"clip{i}.mp4", 24 + 6 * i, 12.0, (96, 64)) for i in range(3)]
    # (id, video): six questions over three clips (p3, p4 reuse clips 0 and 1), the last one's video is missing
    videos = [c.name for c in clips] * 2
    videos[-1] = "gone.mp4"
    mc = ["A. a digit", "B. a cat", "C. a car", "D. nothing"]
    base = {"options": mc, "data_type": "video", "solution": "<answer>A</answer>", "problem_type": "multiple choice"}
    rows = [
        {**base, "problem_id": f"p{i}", "problem": f"What is shown in clip {i}?", "path": v}
        for i, v in enumerate(videos)
    ]
    (root / "ann").mkdir()
    (root / "ann" / "mvbench.json").write_text(json.dumps(rows), encoding="utf-8")
    media = root / "media"
    for name, responses in (
        ("base", {"p1": "<answer>A</answer>"}),
        ("rl", {"p0": "<answer>A</answer>", "p2": "I think (A) a digit", "p3": "<script>alert(1)</script>(A)"}),
    ):
        rc = main(
            ["run", "--model", "fake", "--backend", "fake", "--benchmarks", "mvbench", "--no-progress",
             "--engine-kwargs", json.dumps({"response": "(B) a cat", "responses": responses}),
             "--annotations-dir", str(root / "ann"), "--media-root", str(media), "--out", str(root / name),
             "--cache-dir", str(root / "cache"), "--write-cache", *SAMPLING]
        )  # fmt: skip
        assert rc == 0
    return root


def _index(site: Path, slug: str) -> dict:
    text = (site / "data" / slug / "index.js").read_text()
    return json.loads(text[len("EVR1.index(") : -len(");\n")])


def _cards(site: Path, slug: str) -> list[str]:
    text = (site / "data" / slug / "chunk-00000.js").read_text()
    return json.loads(text[text.index(",") + 1 : -len(");\n")])[0]


def _report(runs: Path, site: Path, *extra: str) -> int:
    return main(["report", str(runs / "base"), str(runs / "rl"), "--out", str(runs / "rep"), "--chart", "none",
                 "--html", str(site), *extra])  # fmt: skip


def test_report_html_shows_the_cached_frames_and_both_runs(runs: Path, tmp_path: Path, capsys) -> None:
    from evr1_cache.reader import CacheReader
    from evr1_cache.spec import SamplingSpec

    site = tmp_path / "site"
    given = ["--annotations-dir", str(runs / "ann"), "--media-root", str(runs / "media"), "--cache-dir",
             str(runs / "cache")]  # fmt: skip
    assert _report(runs, site, *given) == 0
    err = capsys.readouterr().err
    assert f"open {(site / 'index.html').resolve()}" in err
    overview = (site / "index.html").read_text()  # each number says what it averages: the metric vs verdicts
    assert "mvbench accuracy: the benchmark&#39;s metric over per-sample scores" in overview
    assert ">correct verdicts</th>" in overview
    base = _index(site, "base")
    assert base["total"] == N
    verdicts = {row[0]: row[4] for row in base["rows"]}
    assert verdicts == {"mvbench/p0": "wrong", "mvbench/p1": "correct", "mvbench/p2": "wrong", "mvbench/p3": "wrong",
                        "mvbench/p4": "wrong", "mvbench/p5": "error"}  # fmt: skip
    cmp = _index(site, "base-vs-rl")
    assert [r[0] for r in cmp["rows"][:4]] == ["mvbench/p0", "mvbench/p1", "mvbench/p2", "mvbench/p3"]  # changed first
    assert cmp["rows"][0][4] == "wrong → correct"
    assert cmp["rows"][1][4] == "correct → wrong"
    # the strip of p2 is exactly clip2's cache entry under the run's recorded spec
    spec = SamplingSpec.from_dict({k: v for k, v in json.loads((runs / "base/mvbench/run.json").read_text())
                                   ["fingerprint"]["sampling"].items() if k != "key"})  # fmt: skip
    _, meta = CacheReader(runs / "cache").load(runs / "media" / "clip2.mp4", spec)
    card = next(c for c in _cards(site, "base") if 'data-key="mvbench/p2"' in c)
    assert card.count("<img ") == len(meta.frames_indices)
    stamps = [t.strip() for t in card.split('<span class="ts">')[1:]]
    assert [s[: s.index("<")] for s in stamps] == [f"{t:.1f}s" for t in meta.timestamps]
    assert "What is shown in clip 2?" in card
    assert "Ground truth" in card
    rl_cards = _cards(site, "rl")
    p2 = next(c for c in rl_cards if 'data-key="mvbench/p2"' in c)
    assert 'I think (<mark class="answer" title="extracted answer">A</mark>) a digit' in p2
    p3 = next(c for c in rl_cards if 'data-key="mvbench/p3"' in c)
    assert "<script>" not in p3
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in p3
    p5 = next(c for c in rl_cards if 'data-key="mvbench/p5"' in c)
    # every answered card shows the recorded prompt, its hash verified; the media error row sent nothing
    assert sum('class="prompt-hash' in c for c in rl_cards) == N - 1
    assert 'class="prompt-hash' not in p5
    assert "no prompt was recorded" in p5
    assert "gone.mp4" in p5
    assert "error-reason" in p5
    cmp_card = next(c for c in _cards(site, "base-vs-rl") if 'data-key="mvbench/p0"' in c)
    assert cmp_card.count('class="side side-') == 2
    assert ") a cat" in cmp_card
    assert "&lt;answer&gt;" in cmp_card


def test_report_html_reads_the_recorded_command_and_reports_problems(runs: Path, tmp_path: Path, capsys) -> None:
    # a run.json of an older evr1-eval, started in-process, records neither its sources nor a usable command line:
    # without the paths the site still shows responses and scores, and says what is missing (the edited run.json,
    # and rows that cannot be re-scored, leave the results unverified: exit 1)
    run_json = runs / "base" / "mvbench" / "run.json"
    saved = run_json.read_text()
    data = json.loads(saved)
    del data["info"]["sources"]
    run_json.write_text(json.dumps(data))
    site = tmp_path / "bare"
    assert _report(runs, site) == 1
    err = capsys.readouterr().err
    assert "no annotations recorded or given" in err
    assert _index(site, "base")["total"] == N
    # a run whose recorded command names the folders needs no flags
    data["info"]["command"] = ["evr1-eval", "run", "--annotations-dir", str(runs / "ann"),
                               f"--media-root={runs / 'media'}", "--cache-dir", str(runs / "cache")]  # fmt: skip
    run_json.write_text(json.dumps(data))
    ann = runs / "ann" / "mvbench.json"
    original = ann.read_text()
    try:
        ann.write_text(original.replace("What is shown in clip 1?", "Edited question?"))
        site2 = tmp_path / "recorded"
        assert main(["report", str(runs / "base"), "--out", str(runs / "rep2"), "--chart", "none", "--html",
                     str(site2)]) == 1  # fmt: skip  # the annotations and run.json changed since the run
        err = capsys.readouterr().err
        assert "annotation file changed since the run" in err
        card = next(c for c in _cards(site2, "base") if 'data-key="mvbench/p1"' in c)
        assert "<img " in card  # frames found through the recorded --cache-dir
        # the card reads what was sent, not today's annotations
        assert "What is shown in clip 1?" in card
        assert "Edited question?" not in card
        assert 'class="prompt-hash' in card
    finally:
        ann.write_text(original)
        run_json.write_text(saved)


def test_a_record_edited_after_the_run_is_flagged(runs: Path, tmp_path: Path) -> None:
    results = runs / "base" / "mvbench" / "results.jsonl"
    saved = results.read_text()
    rows = [json.loads(line) for line in saved.splitlines()]
    p0 = next(r for r in rows if r["id"] == "p0")
    p0["prompt"]["parts"][-1][1] = "A question the model never saw"
    try:
        results.write_text("".join(json.dumps(r) + "\n" for r in rows))
        site = tmp_path / "edited"
        # the edited record: the report says "not verified" (exit 1) and the card says why
        assert main(["report", str(runs / "base"), "--out", str(tmp_path / "rep"), "--chart", "none", "--html",
                     str(site), "--annotations-dir", str(runs / "ann")]) == 1  # fmt: skip
        card = next(c for c in _cards(site, "base") if 'data-key="mvbench/p0"' in c)
        assert "does not hash to what the model was sent" in card
        assert 'class="prompt-hash' not in card
        assert "never saw" not in card
    finally:
        results.write_text(saved)


def test_report_html_without_jinja2_is_a_clear_error(runs: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    import builtins

    real = builtins.__import__

    def no_jinja(name: str, *a, **k):
        if name == "jinja2":
            raise ImportError("No module named 'jinja2'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_jinja)
    assert _report(runs, tmp_path / "x") == 2
    assert "pip install 'evr1-cache[viewer]'" in capsys.readouterr().err


def test_report_html_verifies_each_run_once(runs: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # collect_run re-scores every stored row: the report and its viewer share one result per run, not one each
    import evr1_eval.report as report_module

    seen: list[str] = []
    real = report_module.collect_run

    def counting(run_dir: Path, given=None):  # type: ignore[no-untyped-def]
        seen.append(Path(run_dir).name)
        return real(run_dir, given)

    monkeypatch.setattr(report_module, "collect_run", counting)
    assert _report(runs, tmp_path / "site") == 0
    assert sorted(seen) == ["base", "rl"]
