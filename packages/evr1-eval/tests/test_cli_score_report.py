"""CLI: list / inspect / score / report, end to end on files, plus the report's chart writers."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from evr1_eval.cli import build_parser, main
from evr1_eval.report import collect_run, markdown_table, write_chart
from evr1_eval.results import row_to_dict
from evr1_eval.types import ScoredSample

OPTS = ["A. one", "B. two", "C. three", "D. four"]


def mc(pid: str, gt: str, **extra: Any) -> dict[str, Any]:
    return {
        "problem_id": pid,
        "problem": "Q?",
        "options": OPTS,
        "solution": f"<answer>{gt}</answer>",
        "problem_type": "multiple choice",
        "path": f"{pid}.mp4",
        **extra,
    }


def write(path: Path, data: Any, jsonl: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(json.dumps(r) for r in data) + "\n" if jsonl else json.dumps(data)
    path.write_text(text, encoding="utf-8")
    return path


def test_help_has_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "evr1-eval score videomme" in capsys.readouterr().out
    for command in ("list", "inspect", "score", "report"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "example" in capsys.readouterr().out


def test_command_modules_expose_the_interface() -> None:
    from evr1_eval import cli

    for module in cli.COMMANDS:
        assert callable(module.add_parser)
        assert callable(module.run)
    args = build_parser().parse_args(["list"])
    assert args.run.__module__ == "evr1_eval.commands.list"


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 23  # the 22 benchmarks and evr1_data
    by_name = {r["name"]: r for r in rows}
    assert by_name["videoreasonbench"]["needs_judge"] == ["open_ended"]
    assert by_name["video_holmes"]["aliases"] == ["holmes"]
    assert main(["list"]) == 0
    assert "vsibench" in capsys.readouterr().out


def test_inspect_counts_types_and_reports_bad_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        mc("1", "A"),
        {
            "problem_id": "2",
            "problem": "How far?",
            "problem_type": "regression",
            "solution": "<answer>2.5</answer>",
            "path": "2.mp4",
            "question_type": "object_abs_distance",
        },
        {**mc("3", "A"), "solution": "<answer>Z</answer>"},
    ]
    ann = write(tmp_path / "vsi.json", rows)
    assert main(["inspect", "vsibench", "--annotations", str(ann), "--show", "1"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["benchmark"] == "vsibench"
    assert out["samples"] == 2
    assert out["problem_types"] == {"multiple_choice": 1, "regression": 1}
    assert out["errors"][0]["item"] == 3  # the third row of the JSON list, 1-based like the message
    assert out["errors"][0]["id"] == "3"
    assert out["examples"][0]["ground_truth"] == "A"
    ok = write(tmp_path / "ok.json", rows[:2])
    assert main(["inspect", "vsibench", "--annotations", str(ok)]) == 0


def test_unknown_benchmark_and_missing_file_are_clear_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inspect", "videome", "--annotations", str(tmp_path / "x.json")]) == 2
    assert "did you mean 'videomme'" in capsys.readouterr().err
    assert main(["inspect", "videomme", "--annotations", str(tmp_path / "x.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_score_writes_rows_and_official_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ann = write(
        tmp_path / "videomme.json",
        [
            mc("1", "A", duration="short"),
            mc("2", "B", duration="short"),
            mc("3", "C", duration="long"),
            {**mc("4", "C"), "options": None},
        ],
    )
    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        json.dumps({"id": "1", "response": "A"})
        + "\n"
        + json.dumps({"id": "2", "response": "the people walk along a quiet river at night and nobody talks"})
        + "\n"
        + "not json\n"
        + json.dumps({"id": "99", "response": "A"})
        + "\n"
    )
    out = tmp_path / "scored"
    rc = main(
        [
            "score",
            "videomme",
            "--annotations",
            str(ann),
            "--predictions",
            str(preds),
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 1  # a row could not be loaded: the count and the first reasons are shown, the exit says so
    captured = capsys.readouterr()
    assert "1 annotation row(s) could not be loaded (3 loaded)" in captured.err
    assert "has no options" in captured.err
    printed = json.loads(captured.out)
    # 1 right, 2 unanswered (dropped by the official rule), 3 has no prediction (error row, counted wrong).
    assert printed["metrics"]["accuracy"] == pytest.approx(50.0)
    assert printed["metrics"]["accuracy_strict"] == pytest.approx(100 / 3, abs=1e-3)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["primary"] == "accuracy"
    assert summary["load_errors"] == 1
    assert any("line 3: not JSON" in p for p in summary["problems"])
    assert any("ids not in the annotations" in p for p in summary["problems"])
    assert any("has no options" in p for p in summary["problems"])
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["1", "2", "3"]
    assert rows[2]["error"] == "no prediction for this id"
    assert rows[0]["extracted"] == "A"
    assert rows[0]["score"] == 1.0
    assert rows[0]["evr1_score"] == 1.0
    assert rows[1]["evr1_score"] == 0.0
    assert printed["evr1_metrics"]["accuracy"] == pytest.approx(100 / 3, abs=1e-3)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["annotations"]["digest"].startswith("sha256:")
    assert manifest["annotations"]["load_errors"] == 1
    assert manifest["reference"].startswith("thanku-all/parse_answer")
    capsys.readouterr()
    # a `score --out` folder is a benchmark folder: `report` re-aggregates it directly
    assert main(["report", str(out), "--out", str(tmp_path / "rep"), "--chart", "none"]) == 0
    assert "| videomme | accuracy | 50.0 · evr1 33.3 |" in (tmp_path / "rep" / "report.md").read_text()
    assert not (tmp_path / "rep" / "chart.png").exists()


def _bench_rows(bench: str, scores: list[float], **kw: Any) -> list[ScoredSample]:
    return [
        ScoredSample(
            id=str(i),
            benchmark=bench,
            problem_type="multiple_choice",
            response="x",
            extracted="A",
            score=s,
            evr1_score=s,
            **kw,
        )
        for i, s in enumerate(scores)
    ]


def _write_run(run_dir: Path, bench: str, rows: list[ScoredSample], shards: int = 1) -> None:
    bench_dir = run_dir / bench
    bench_dir.mkdir(parents=True, exist_ok=True)
    for rank in range(shards):
        name = "results.jsonl" if shards == 1 else f"results.rank{rank}-of-{shards}.jsonl"
        mine = rows[rank::shards]
        (bench_dir / name).write_text("".join(json.dumps(row_to_dict(r)) + "\n" for r in mine))
    (bench_dir / "run.json").write_text(json.dumps({"fingerprint": {"model": run_dir.name}, "info": {}}))


def test_report_compares_runs_and_merges_shards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, rl = tmp_path / "base", tmp_path / "rl"
    _write_run(base, "lvbench", _bench_rows("lvbench", [1, 0, 0, 0]))
    _write_run(rl, "lvbench", _bench_rows("lvbench", [1, 1, 1, 0]), shards=2)  # two machines' files merged
    mlvu = [
        ScoredSample(
            id=str(i),
            benchmark="mlvu",
            problem_type="multiple_choice",
            response="x",
            extracted="A",
            score=s,
            evr1_score=s,
            groups={"task": t},
        )
        for i, (s, t) in enumerate([(1, "count"), (0, "order"), (0, "order"), (0, "order")])
    ]
    _write_run(rl, "mlvu", mlvu)
    judged = _bench_rows("videoreasonbench", [0, 0], needs_judge=True)
    _write_run(rl, "videoreasonbench", judged)
    out = tmp_path / "report"
    # hand-written rows: no manifest, no annotations to re-score them against: the report is written, marked as not
    # verified, and the exit code says so
    assert main(["report", str(base), str(rl), "--out", str(out), "--chart", "stdlib"]) == 1
    captured = capsys.readouterr()
    assert "results NOT verified" in captured.err
    table = (out / "report.md").read_text()
    assert "| lvbench | accuracy | 25.0 · evr1 25.0 | 75.0 · evr1 75.0 |" in table
    # M-Avg over MLVU dev's 7 tasks (lmms-eval): (100 + 0) / 7, not the item mean 25 (evr1 reports that)
    assert "| mlvu | m_avg | - | 14.3 · evr1 25.0 |" in table
    assert "| videoreasonbench | accuracy | - | needs judge · evr1 0.0 |" in table
    assert "## Run settings (manifest.json)" in table
    assert "- rl / lvbench: no manifest" in table
    assert "bars only" in captured.err
    summary = json.loads((out / "summary.json").read_text())
    assert [r["name"] for r in summary["runs"]] == ["base", "rl"]
    assert summary["runs"][1]["benchmarks"]["lvbench"]["counts"]["samples"] == 4
    assert summary["runs"][1]["settings"]["lvbench"]["fingerprint"] == {"model": "rl"}
    png = (out / "chart.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")


def test_report_on_a_folder_without_results_fails_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty"), "--out", str(tmp_path / "r")]) == 2
    assert "no benchmark results" in capsys.readouterr().err


def _png_size_and_pixels(data: bytes) -> tuple[int, int, bytes]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, zlib.decompress(idat)


def test_stdlib_chart_draws_bars_proportional_to_scores(tmp_path: Path) -> None:
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    _write_run(run_a, "lvbench", _bench_rows("lvbench", [1, 1, 1, 1]))
    _write_run(run_b, "lvbench", _bench_rows("lvbench", [1, 0, 0, 0]))
    path = tmp_path / "chart.png"
    assert write_chart([collect_run(run_a), collect_run(run_b)], path, backend="stdlib") == "stdlib"
    width, height, raw = _png_size_and_pixels(path.read_bytes())
    stride = width * 3 + 1

    def column_height(rgb: tuple[int, int, int]) -> int:
        count = 0
        for y in range(height):
            row = raw[y * stride + 1 : (y + 1) * stride]
            if any(tuple(row[i : i + 3]) == rgb for i in range(0, len(row), 3)):
                count += 1
        return count

    tall, short = column_height((31, 119, 180)), column_height((255, 127, 14))
    assert tall == 200
    assert short == 50


def test_matplotlib_chart(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the `report` extra; installed by `nox -s eval` via the test group")
    run = tmp_path / "a"
    _write_run(run, "lvbench", _bench_rows("lvbench", [1, 0]))
    _write_run(run, "videoreasonbench", _bench_rows("videoreasonbench", [0], needs_judge=True))  # no value: no bar
    path = tmp_path / "chart.png"
    assert write_chart([collect_run(run)], path, backend="matplotlib") == "matplotlib"
    width, height, _ = _png_size_and_pixels(path.read_bytes())
    assert width > 300
    assert height > 200


def test_markdown_table_marks_partial_judging() -> None:
    from evr1_eval.benchmarks import get_benchmark
    from evr1_eval.report import RunReport

    bench = get_benchmark("vcrbench")
    rows = [
        *_bench_rows("vcrbench", [1, 0]),
        ScoredSample(
            id="9",
            benchmark="vcrbench",
            problem_type="open_ended",
            response="x",
            extracted=None,
            score=0.0,
            needs_judge=True,
        ),
    ]
    table = markdown_table([RunReport("r", "r", {"vcrbench": bench.aggregate(rows)})])
    assert "| vcrbench | accuracy | 50.0 (1 need judge) · evr1 33.3 |" in table


def test_zero_results_never_look_like_missing_ones(tmp_path: Path) -> None:
    from evr1_eval.report import bar_label

    assert (bar_label(0.0), bar_label(None), bar_label(12.34)) == ("0.0", "n/a", "12.3")
    zero, absent = tmp_path / "zero", tmp_path / "absent"
    _write_run(zero, "lvbench", _bench_rows("lvbench", [0, 0]))
    _write_run(zero, "mlvu", _bench_rows("mlvu", [1, 0]))
    _write_run(absent, "mlvu", _bench_rows("mlvu", [1, 1]))  # no lvbench result at all
    path = tmp_path / "chart.png"
    write_chart([collect_run(zero), collect_run(absent)], path, backend="stdlib")
    width, height, raw = _png_size_and_pixels(path.read_bytes())
    stride = width * 3 + 1
    dark = (40, 40, 40)

    def dark_columns() -> set[int]:
        cols = set()
        for y in range(height):
            row = raw[y * stride + 1 : (y + 1) * stride]
            cols |= {i // 3 for i in range(0, len(row), 3) if tuple(row[i : i + 3]) == dark}
        return cols

    cols = dark_columns()
    assert cols, "a zero result must be drawn (a stub under the axis)"
    # lvbench is the first group: the zero run's stub is in its first bar slot, the absent run draws nothing there
    margin, bar_w = 20, 8
    first_bar = set(range(margin + 4, margin + 4 + bar_w - 1))
    second_bar = set(range(margin + 4 + bar_w, margin + 4 + 2 * bar_w - 1))
    assert cols & first_bar
    assert not cols & second_bar


def test_matplotlib_chart_labels_its_axes_and_bars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib", reason="the `report` extra; installed by `nox -s eval` via the test group")
    import matplotlib.figure

    seen: dict[str, Any] = {}
    original = matplotlib.figure.Figure.savefig

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        ax = self.axes[0]
        seen.update(x=ax.get_xlabel(), y=ax.get_ylabel(), texts=sorted(t.get_text() for t in ax.texts))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    zero, absent = tmp_path / "zero", tmp_path / "absent"
    _write_run(zero, "lvbench", _bench_rows("lvbench", [0, 0]))
    _write_run(absent, "mlvu", _bench_rows("mlvu", [1, 1]))
    write_chart([collect_run(zero), collect_run(absent)], tmp_path / "c.png", backend="matplotlib")
    assert seen["texts"] == ["0.0", "100.0", "n/a", "n/a"]  # every bar labelled; the zero bar says 0.0
    assert seen["x"] == "benchmark"
    assert "official primary metric" in seen["y"]


def test_score_reports_repeated_ids_and_rows_without_a_response(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Neither is silent: each warning names the predictions file and its 1-based line (and the line repeated)."""
    ann = write(tmp_path / "videomme.json", [mc("1", "A"), mc("2", "B")])
    preds = tmp_path / "preds.jsonl"
    rows = [{"id": "1", "response": "B"}, {"id": "2"}, {"id": "1", "response": "A"}, {"id": "2", "error": "timeout"}]
    preds.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "scored"
    args = ["score", "videomme", "--annotations", str(ann), "--predictions", str(preds), "--out", str(out)]
    assert main([*args, "--no-progress"]) == 1  # scored, but a predictions file with problems is not a clean run
    err = capsys.readouterr().err
    assert "warning: preds.jsonl line 2: id '2' has no `response` (scored as an error row)" in err
    assert "warning: preds.jsonl line 3: id '1' repeats line 1 (this later row is scored)" in err
    assert "preds.jsonl line 4: id '2' repeats line 2" in err
    assert "line 4: id '2' has no" not in err  # an `error` row is a recorded failure, not a missing response
    scored = {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert scored["1"]["score"] == 1.0  # the later row
    assert scored["2"]["error"] == "timeout"


def reading_is_reported(
    tmp_path: Path, outs: dict[str, Path], key: str, other: str, *, stored: float
) -> tuple[Path, dict[str, Any]]:
    """`report` names the reading (`key`) in which two runs differ; the check re-scores with the recorded choice, so
    the rows of the `other` run, claimed in its manifest as read officially, no longer verify. Returns that manifest's
    path and its original record."""
    report = tmp_path / "rep"
    assert main(["report", str(outs["official"]), str(outs[other]), "--out", str(report), "--chart", "none"]) == 0
    md = (report / "report.md").read_text()
    label = key.replace("_", " ")
    assert f"{key} differs" in md
    assert f"{label} official" in md
    assert f"{label} {other}" in md
    manifest_path = outs[other] / "manifest.json"
    record = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**record, key: "official"}))
    assert main(["report", str(outs[other]), "--out", str(tmp_path / "rep2"), "--chart", "none"]) == 1
    fresh = 1.0 - stored
    assert f"stored score {stored}, the scorer's score {fresh}" in (tmp_path / "rep2" / "report.md").read_text()
    return manifest_path, record


def test_score_answer_tags_official_by_default_read_as_a_named_recorded_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`score` reads a response as MINERVA's official extractor does by default (the last capital letter: A), and the
    final <answer> tag first with `--answer-tags read` (B); the choice is in the manifest, the summary and the report,
    the re-scoring check uses the recorded choice, and a report comparing the two warns."""
    ann = write(tmp_path / "minerva.json", [mc("1", "B"), mc("2", "C")])
    preds = write(
        tmp_path / "preds.jsonl",
        [{"id": "1", "response": "Let me think... <answer>B</answer> so A is wrong"}, {"id": "2", "response": "C"}],
        jsonl=True,
    )
    outs = {}
    for tags in ("official", "read"):
        out = outs[tags] = tmp_path / tags
        extra = [] if tags == "official" else ["--answer-tags", "read"]
        argv = ["score", "minerva", "--annotations", str(ann), "--predictions", str(preds), "--out", str(out)]
        assert main([*argv, "--no-progress", *extra]) == 0
        captured = capsys.readouterr()
        assert "verified 2/2" in captured.err
        printed = json.loads(captured.out)
        rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        assert json.loads((out / "manifest.json").read_text())["answer_tags"] == tags
        if tags == "official":
            assert (rows[0]["extracted"], rows[0]["score"]) == ("A", 0.0)
            assert printed["metrics"]["accuracy"] == pytest.approx(50.0)
            assert not any("answer tags" in n for n in printed["notes"])
        else:
            assert (rows[0]["extracted"], rows[0]["score"]) == ("B", 1.0)
            assert [r["details"]["answer_tag_read"] for r in rows] == [True, False]
            assert printed["metrics"]["accuracy"] == pytest.approx(100.0)
            assert printed["counts"]["answer_tag_read"] == 1
            assert any(n.startswith("answer tags read") for n in printed["notes"])
        assert rows[0]["evr1_score"] == 1.0  # the evr1 protocol reads the tag either way
    reading_is_reported(tmp_path, outs, "answer_tags", "read", stored=1.0)


#: A letter inside the reasoning (C), the answer after it (B): lmms-eval's pipeline strips the blocks, a raw reading
#: (lmms-eval with `--reasoning_tags none`) does not.
THOUGHT = "<think>Option C looks plausible.</think><think>Re-checking.</think>B"


def test_score_reasoning_tags_official_by_default_keep_and_strip_as_named_recorded_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """MVBench's official pipeline (lmms-eval) strips reasoning blocks: B, right; `--reasoning-tags keep` reads the raw
    response as `mcq_acc` does without stripping: C, wrong; `strip` is MVBench's own pipeline again. The choice is in
    the manifest, the summary and the report; the re-scoring check uses the recorded choice; a manifest written before
    the option existed means the official pipeline."""
    ann = write(tmp_path / "mvbench.json", [mc("1", "B"), mc("2", "C")])
    preds = write(
        tmp_path / "preds.jsonl", [{"id": "1", "response": THOUGHT}, {"id": "2", "response": "C"}], jsonl=True
    )
    outs = {}
    for mode, (letter, accuracy) in {"official": ("B", 100.0), "keep": ("C", 50.0), "strip": ("B", 100.0)}.items():
        out = outs[mode] = tmp_path / mode
        extra = [] if mode == "official" else ["--reasoning-tags", mode]
        argv = ["score", "mvbench", "--annotations", str(ann), "--predictions", str(preds), "--out", str(out)]
        assert main([*argv, "--no-progress", *extra]) == 0
        captured = capsys.readouterr()
        assert "verified 2/2" in captured.err
        printed = json.loads(captured.out)
        rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        record = json.loads((out / "manifest.json").read_text())
        assert (record["reasoning_tags"], record["answer_tags"]) == (mode, "official")
        assert (rows[0]["extracted"], rows[0]["score"]) == (letter, float(letter == "B"))
        assert printed["metrics"]["accuracy"] == pytest.approx(accuracy)
        assert rows[0]["evr1_score"] == 1.0  # the evr1 protocol reads the raw response either way
        if mode == "official":
            assert "reasoning_tags" not in rows[0]["details"]
            assert "reasoning_tags_differ" not in printed["counts"]
        else:
            assert [r["details"]["reasoning_tags"] for r in rows] == [
                {"applied": mode, "differs": mode == "keep"}, {"applied": mode, "differs": False}]  # fmt: skip
            assert printed["counts"]["reasoning_tags_differ"] == int(mode == "keep")
            expected = {
                "keep": "reasoning tags kept (--reasoning-tags keep, not this benchmark's official pipeline",
                "strip": "reasoning tags stripped (--reasoning-tags strip) on 2 responses, as this benchmark's official",
            }[mode]
            assert any(n.startswith(expected) for n in printed["notes"]), printed["notes"]
    manifest_path, record = reading_is_reported(tmp_path, outs, "reasoning_tags", "keep", stored=0.0)
    manifest_path.write_text(json.dumps({**record, "reasoning_tags": "drop"}))  # a name this version does not know
    assert main(["report", str(outs["keep"]), "--out", str(tmp_path / "rep3"), "--chart", "none"]) == 1
    assert "unknown reasoning_tags 'drop'" in (tmp_path / "rep3" / "report.md").read_text()
    # an older manifest (no reading recorded) means the official reading: it verifies and reports "official"
    old_path = outs["official"] / "manifest.json"
    old = {k: v for k, v in json.loads(old_path.read_text()).items() if k not in ("answer_tags", "reasoning_tags")}
    old_path.write_text(json.dumps(old))
    assert (
        main(["report", str(outs["official"]), str(outs["strip"]), "--out", str(tmp_path / "r4"), "--chart", "none"])
        == 0
    )
    md = (tmp_path / "r4" / "report.md").read_text()
    assert "answer tags official; reasoning tags official" in md
    assert "reasoning_tags differs" in md  # official vs strip: recorded as two readings, even where they agree


def test_score_refuses_an_unknown_reasoning_tags_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ann = write(tmp_path / "mvbench.json", [mc("1", "B")])
    preds = write(tmp_path / "preds.jsonl", [{"id": "1", "response": "B"}], jsonl=True)
    argv = ["score", "mvbench", "--annotations", str(ann), "--predictions", str(preds), "--out", str(tmp_path / "o")]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--reasoning-tags", "drop"])
    assert exc.value.code == 2
    assert "--reasoning-tags: invalid choice: 'drop'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_manifest_without_a_reading_means_the_official_one() -> None:
    """Manifests written before `answer_tags` / `reasoning_tags` existed compare equal to ones recording "official",
    and unequal to a run that read responses another way."""
    from evr1_eval import manifest

    new = manifest.build({"benchmark": "mvbench"})
    assert (new["answer_tags"], new["reasoning_tags"]) == ("official", "official")
    assert manifest.build({"benchmark": "mvbench", "reasoning_tags": "keep"})["reasoning_tags"] == "keep"
    old = {k: v for k, v in new.items() if k not in ("answer_tags", "reasoning_tags")}
    assert manifest.differences({"old": old, "new": new}) == []
    (line,) = manifest.differences({"old": old, "keep": {**new, "reasoning_tags": "keep"}})
    assert line.startswith("reasoning_tags differs")
