"""CLI: list, validate, score (with resume), --help examples, and the console-script entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from evr1_rewards.cli import main


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def test_entry_point_is_declared() -> None:
    eps = [ep for ep in entry_points(group="console_scripts") if ep.name == "evr1-rewards"]
    assert eps
    assert eps[0].value == "evr1_rewards.cli:main"


def test_help_has_examples() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "evr1_rewards.cli", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0
    assert "evr1-rewards score preds.jsonl" in out.stdout


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    assert "spatiotemporal_grounding" in text
    assert "spatial-temporal grounding" not in text.split("aliases")[0]
    assert "code sandbox: bubblewrap" in text
    assert main(["list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {d["type"] for d in data} >= {"code", "math", "tracking"}


def test_validate_reports_bad_rows_with_location(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _write(
        tmp_path / "train.jsonl",
        [
            {"problem_type": "multiple choice", "answer": "<answer>B</answer>", "options": ["A. x", "B. y"]},
            {"problem_type": "temporal grounding", "answer": '{"time": [3, 1]}', "problem_id": "tg-7"},
            {"problem_type": "numerical", "answer": "12"},
            "{broken json",
            {"problem_type": "grounding??", "answer": "x"},
        ],
    )
    assert main(["validate", str(data)]) == 1
    err = capsys.readouterr().err
    assert f"{data}:2 (id tg-7)" in err
    assert "reversed" in err
    assert f"{data}:4: invalid JSON" in err
    assert f"{data}:5" in err
    assert "unknown problem_type" in err
    good = _write(tmp_path / "good.jsonl", [{"problem_type": "boolean", "answer": "Yes"}])
    assert main(["validate", str(good)]) == 0


def test_validate_and_score_treat_none_extras_as_absent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the rows of a heterogeneous dataset exported to JSONL: every row has every extras key, None where it had none
    rows = [
        {"problem_type": "numerical", "answer": "3", "response": "<answer>3</answer>", "options": None,
         "rel_tol": None, "extras": {"abs_tol": None, "official": None}},
        {"problem_type": "mcq", "answer": "B", "response": "<answer>B</answer>", "options": ["A. x", "B. y"],
         "rel_tol": None, "extras": {"abs_tol": None, "official": None}},
        {"problem_type": "regression", "answer": "4", "response": "<answer>4</answer>", "options": None,
         "rel_tol": None, "extras": {"abs_tol": None, "official": True}},
    ]  # fmt: skip
    data = _write(tmp_path / "hetero.jsonl", rows)
    assert main(["validate", str(data)]) == 0, capsys.readouterr().err
    assert main(["score", str(data), "-o", str(tmp_path / "scored.jsonl")]) == 0, capsys.readouterr().err
    scored = [json.loads(line) for line in (tmp_path / "scored.jsonl").read_text().splitlines()]
    assert [r["reward"]["accuracy"] for r in scored] == [1.0, 1.0, 1.0]


def test_score_writes_scored_jsonl_and_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    preds = _write(
        tmp_path / "preds.jsonl",
        [
            {"id": "a", "problem_type": "mcq", "response": "<answer>B</answer>", "ground_truth": "B"},
            {"id": "b", "problem_type": "mcq", "response": "<answer>C</answer>", "ground_truth": "B"},
            {"id": "c", "problem_type": "numerical", "prediction": "<answer>5</answer>", "answer": "5"},
            {"id": "d", "problem_type": "numerical", "response": "x", "answer": "oops"},
        ],
    )
    out = tmp_path / "scored.jsonl"
    assert main(["score", str(preds), "-o", str(out)]) == 1  # one bad row → non-zero exit, others still scored
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r.get("reward", {}).get("overall") for r in rows] == [1.0, pytest.approx(0.1), 1.0, None]
    assert "does not contain a number" in rows[3]["reward_error"]
    summary = json.loads((tmp_path / "scored.summary.json").read_text())
    assert summary["per_type"]["multiple_choice"]["n"] == 2
    assert summary["per_type"]["multiple_choice"]["accuracy"] == 0.5
    assert summary["errors"] == 1
    assert "multiple_choice" in capsys.readouterr().out


def test_score_resumes_from_a_partial_file(tmp_path: Path) -> None:
    preds = _write(
        tmp_path / "p.jsonl",
        [
            {"id": str(i), "problem_type": "mcq", "response": "<answer>A</answer>", "ground_truth": "A"}
            for i in range(4)
        ],
    )
    out = tmp_path / "o.jsonl"
    partial = tmp_path / "o.jsonl.partial"
    # A previous run finished rows 0-1 (row 1 marked so we can see it is kept, not recomputed) and died mid-line.
    partial.write_text(
        json.dumps({"_key": "0", "reward": {"overall": 1.0, "accuracy": 1.0, "format": 1.0, "problem_type": "multiple_choice"}}) + "\n"
        + json.dumps({"_key": "1", "reward": {"overall": 0.5, "accuracy": 0.5, "format": 0.0, "problem_type": "multiple_choice"}}) + "\n"
        + '{"_key": "2", "rew'
    )  # fmt: skip
    assert main(["score", str(preds), "-o", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["_key"] for r in rows] == ["0", "1", "2", "3"]
    assert rows[1]["reward"]["overall"] == 0.5  # kept from the previous run
    assert not partial.exists()


@pytest.mark.parametrize("command", ["validate", "score"])
def test_a_broken_file_is_one_clear_error_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    array = tmp_path / "rows.json"
    array.write_text('[\n  {"problem_type": "numerical", "solution": "3"},\n  {"problem_type": \n]\n', encoding="utf-8")
    assert main([command, str(array)]) == 2
    err = capsys.readouterr().err
    assert f"{array}:4: invalid JSON array" in err, err
    assert "JSONL" in err, err
    latin = tmp_path / "rows.jsonl"
    latin.write_bytes(b'{"problem_type": "numerical", "solution": "3"}\n{"solution": "caf\xe9"}\n')
    assert main([command, str(latin)]) == 2
    err = capsys.readouterr().err
    assert f"{latin}:2: not UTF-8" in err, err
    assert "save the file as UTF-8" in err, err
