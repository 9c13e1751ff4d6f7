"""Results you can verify (evr1_eval.verify): each tampering of a finished run is named and fails the exit code.

A real run (fake backend, real videos) answers 2 of 4 right (50%). Each attack edits a copy of its folder the way an
attacker would to make 50% read 100% or to pass other rows off as the run's: before, `report` believed every one of
them silently. Now `report` names the problem, marks report.md "NOT verified" and exits 1; the clean run reads
"verified 4/4" and exits 0. A resume re-scores the rows it keeps and fails the same way; `score` flags repeated and
unknown prediction ids.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from evr1_cache.testing import make_synthetic_video
from evr1_eval.cli import main

N = 4
SAMPLING = ["--sampling", "fps=2", "--sampling", "max_pixels=3136", "--sampling", "min_pixels=784"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("verify")
    ann = root / "ann"
    make_synthetic_video(ann / "clip.mp4", 12, 6.0, (96, 64))
    rows = [
        {
            "problem_id": f"p{i}",
            "problem": f"Question {i}?",
            "options": ["A. yes", "B. no"],
            "solution": f"<answer>{'A' if i % 2 == 0 else 'B'}</answer>",  # the fake model answers A: half right
            "problem_type": "multiple choice",
            "path": "clip.mp4",
        }
        for i in range(N)
    ]
    (ann / "mvbench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return root


def _run(dataset: Path, out: Path, *extra: str) -> int:
    argv = ["run", "--model", "fake-model", "--backend", "fake", "--engine-kwargs", json.dumps({"response": "A"})]
    argv += ["--benchmarks", "mvbench", "--annotations-dir", str(dataset / "ann"), "--out", str(out), "--no-progress"]
    return main([*argv, *SAMPLING, *extra])


@pytest.fixture(scope="module")
def clean(dataset: Path) -> Path:
    out = dataset / "clean"
    assert _run(dataset, out) == 0
    return out


def _report(run: Path, out: Path) -> int:
    return main(["report", str(run), "--out", str(out), "--chart", "none"])


def _lines(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "mvbench" / "results.jsonl").read_text().splitlines()]


def _write(run: Path, rows: list[dict], name: str = "results.jsonl", *, newline: bool = True) -> None:
    text = "\n".join(json.dumps(r) for r in rows) + ("\n" if newline else "")
    (run / "mvbench" / name).write_text(text)


def test_a_clean_run_is_verified(clean: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _report(clean, tmp_path / "rep") == 0
    assert "mvbench: verified 4/4" in capsys.readouterr().err
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Verification\n" in md
    assert "mvbench: verified 4/4" in md
    manifest = json.loads((clean / "mvbench" / "manifest.json").read_text())
    assert set(manifest["files"]) >= {"results.jsonl", "run.json", "summary.json"}
    assert all(v["sha256"].startswith("sha256:") for v in manifest["files"].values())
    assert manifest["writing"] == []


def _score_to_one(run: Path) -> None:
    rows = _lines(run)
    for r in rows:
        r["score"] = r["evr1_score"] = 1.0
    _write(run, rows)


def _unknown_id(run: Path) -> None:
    rows = _lines(run)
    _write(run, [*rows, {**rows[0], "id": "not-a-question"}])


def _extra_file(run: Path) -> None:
    rows = _lines(run)
    _write(run, [{**rows[1], "score": 1.0, "evr1_score": 1.0}], "results.extra.jsonl")


def _deleted_rows(run: Path) -> None:
    _write(run, [r for r in _lines(run) if r["score"] == 1.0])  # keep only the right answers: 100%


def _torn_line(run: Path) -> None:
    path = run / "mvbench" / "results.jsonl"
    path.write_bytes(path.read_bytes()[:-20])


def _score_out_of_range(run: Path) -> None:
    rows = _lines(run)
    rows[1]["score"] = 7.5
    _write(run, rows)


def _score_nan(run: Path) -> None:
    path = run / "mvbench" / "results.jsonl"
    rows = path.read_text().splitlines()
    first = json.loads(rows[1])
    rows[1] = rows[1].replace(f'"score": {json.dumps(first["score"])}', '"score": NaN')
    path.write_text("\n".join(rows) + "\n")


def _other_benchmark(run: Path) -> None:
    rows = _lines(run)
    rows[0]["benchmark"] = "videomme"
    _write(run, rows)


def _duplicate_id(run: Path) -> None:
    rows = _lines(run)
    wrong = next(r for r in rows if r["score"] == 0.0)
    _write(run, [*rows, {**wrong, "score": 1.0, "evr1_score": 1.0, "response": "B"}])


def _wrong_types(run: Path) -> None:
    rows = _lines(run)
    rows[0]["score"] = "1.0"  # before: a traceback in the aggregation
    rows[1]["groups"] = ["not", "an", "object"]
    _write(run, rows)


def _model_renamed(run: Path) -> None:
    path = run / "mvbench" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["model"] = "a-much-better-model"
    path.write_text(json.dumps(manifest))


ATTACKS: dict[str, tuple[Callable[[Path], None], str]] = {
    "score edited 0 -> 1": (_score_to_one, "stored score 1.0, the scorer's score 0.0"),
    "a row for an id not in the annotations": (_unknown_id, "'not-a-question' is not in the annotations"),
    "an extra results.<anything>.jsonl": (_extra_file, "results.extra.jsonl: a results file the run did not write"),
    "deleted rows": (_deleted_rows, "selected id(s) have no row"),
    "a torn last line": (_torn_line, "torn last line"),
    "a score of 7.5": (_score_out_of_range, "score 7.5 is outside [0, 1]"),
    "a score of NaN": (_score_nan, "score nan is not a number"),
    "a row of another benchmark": (_other_benchmark, "a row of benchmark 'videomme'"),
    "an id written twice": (_duplicate_id, "written again"),
    "the model renamed in manifest.json": (_model_renamed, "names model 'a-much-better-model'"),
    "fields of the wrong type": (_wrong_types, "score '1.0' is not a number"),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_each_tampering_is_named_and_fails_the_report(
    attack: str, clean: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit, message = ATTACKS[attack]
    run = tmp_path / "run"
    shutil.copytree(clean, run)
    edit(run)
    capsys.readouterr()
    assert _report(run, tmp_path / "rep") == 1  # before: 0, and 50% could read 100%
    err = capsys.readouterr().err
    assert message in err, err
    assert "results NOT verified" in err
    assert "results NOT verified" in (tmp_path / "rep" / "report.md").read_text()


def test_a_changed_results_file_is_caught_by_its_hash_even_when_every_row_rescores(
    clean: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    shutil.copytree(clean, run)
    rows = _lines(run)
    for r in rows:  # the right answer and its (consistent) score: only the recorded hash can tell
        r["response"] = r["extracted"] = "A" if int(r["id"][1:]) % 2 == 0 else "B"
        r["score"] = r["evr1_score"] = 1.0
    _write(run, rows)
    capsys.readouterr()
    assert _report(run, tmp_path / "rep") == 1
    assert "results.jsonl: changed since the run wrote it" in capsys.readouterr().err


def test_a_resume_rescores_the_rows_it_keeps(dataset: Path, clean: Path, tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    shutil.copytree(clean, run)
    _score_to_one(run)
    capsys.readouterr()
    assert _run(dataset, run) == 1  # before: resumed silently, 100%
    err = capsys.readouterr().err
    assert "(stored before this run)" in err
    assert "stored score 1.0, the scorer's score 0.0" in err


def test_an_interrupted_run_resumes_cleanly_and_reports_unfinished_until_then(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert _run(dataset, run, "--limit", "2") == 0
    path = run / "mvbench" / "results.jsonl"
    manifest = json.loads((run / "mvbench" / "manifest.json").read_text())
    manifest["writing"] = ["results.jsonl"]  # as a run killed mid-way leaves it
    (run / "mvbench" / "manifest.json").write_text(json.dumps(manifest))
    path.write_bytes(path.read_bytes() + b'{"id": "p2", "benchm')  # and a torn tail
    capsys.readouterr()
    assert _report(run, tmp_path / "rep") == 1
    assert "has not finished" in capsys.readouterr().err
    assert _run(dataset, run) == 0  # the resume expects both: no warning, verified
    captured = capsys.readouterr()
    assert "verified 4/4" in captured.out
    assert "warning" not in captured.err
    assert _report(run, tmp_path / "rep2") == 0


def test_score_flags_repeated_and_unknown_prediction_ids(dataset: Path, tmp_path: Path, capsys) -> None:
    preds = tmp_path / "preds.jsonl"
    lines = [{"id": f"p{i}", "response": "A"} for i in range(N)]
    preds.write_text("".join(json.dumps(x) + "\n" for x in lines))
    argv = ["score", "mvbench", "--annotations", str(dataset / "ann" / "mvbench.jsonl"), "--predictions"]
    assert main([*argv, str(preds), "--out", str(tmp_path / "s1"), "--no-progress"]) == 0
    assert "mvbench: verified 4/4" in capsys.readouterr().err
    assert _report(tmp_path / "s1", tmp_path / "rep") == 0  # the scored folder verifies in `report` too
    preds.write_text("".join(json.dumps(x) + "\n" for x in [*lines, {"id": "p1", "response": "B"}]))
    assert main([*argv, str(preds), "--out", str(tmp_path / "s2"), "--no-progress"]) == 1
    assert "id 'p1' repeats line 2" in capsys.readouterr().err
    preds.write_text("".join(json.dumps(x) + "\n" for x in [*lines, {"id": "p99", "response": "A"}]))
    assert main([*argv, str(preds), "--out", str(tmp_path / "s3"), "--no-progress"]) == 1
    assert "not in the annotations" in capsys.readouterr().err
