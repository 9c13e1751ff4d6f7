"""train/eval reward parity: one table (tests/data/reward_parity.json) of (problem type, response, ground truth,
options) covering every registered problem type, scored by

- the verl adapter `evr1_rewards.integrations.verl.compute_score` (what verl's reward loop calls in training),
- the TRL reward function from `evr1_rewards.integrations.trl.make_reward_func` (plain and conversational completions),
- `evr1_rewards.score`,
- evr1-eval's evr1-protocol score (`evr1_score`, the way training scores): `evr1-eval score <benchmark>`
  (results.jsonl) for registered benchmarks, and a benchmark without an official rule for the other types.

Training (reward mode) and evaluation (metric mode) must give the same accuracy, except where the table documents a
metric convention (a reversed span is swapped by the metric, malformed for the reward).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from evr1_eval.benchmarks import Benchmark
from evr1_eval.cli import main as eval_main
from evr1_rewards import available_types, normalize_problem_type, score
from evr1_rewards.integrations.trl import make_reward_func
from evr1_rewards.integrations.verl import compute_score

TABLE = json.loads((Path(__file__).parent / "data" / "reward_parity.json").read_text(encoding="utf-8"))
CASES: list[dict[str, Any]] = TABLE["cases"]
BY_ID = {c["id"]: c for c in CASES}
EXACT = 1e-12


def test_table_covers_every_problem_type() -> None:
    covered = {normalize_problem_type(c["problem_type"]) for c in CASES}
    assert covered == set(available_types()), f"no parity case for {sorted(set(available_types()) - covered)}"
    for ptype in covered:  # each type has a right answer, so an adapter that scores everything 0 cannot pass
        accs = [c.get("expect") for c in CASES if normalize_problem_type(c["problem_type"]) == ptype]
        assert 1.0 in accs, f"{ptype}: the table has no case with a known correct answer"
    assert len(BY_ID) == len(CASES), "duplicate case ids"


def _verl(case: dict[str, Any], **kw: Any) -> dict[str, float]:
    """As verl 0.9's reward loop calls it, with the extra_info evr1-train's dataset writes (problem_type, options)."""
    extra_info = {"problem_type": case["problem_type"], "options": case.get("options") or [], "index": 0}
    return compute_score(
        data_source="evr1", solution_str=case["response"], ground_truth=case["truth"], extra_info=extra_info, **kw
    )


def _trl(case: dict[str, Any], component: str, conversational: bool) -> float | None:
    fn = make_reward_func(component=component)  # type: ignore[arg-type]
    completion: Any = [{"role": "assistant", "content": case["response"]}] if conversational else case["response"]
    out = fn(
        prompts=["<video>question"],
        completions=[completion],
        ground_truth=[case["truth"]],
        problem_type=[case["problem_type"]],
        options=[case.get("options")],
    )
    assert len(out) == 1
    return out[0]


@pytest.mark.parametrize("case_id", sorted(BY_ID))
def test_training_entry_points_agree(case_id: str) -> None:
    case = BY_ID[case_id]
    direct = score(case["response"], case["truth"], case["problem_type"], options=case.get("options"))
    verl = _verl(case)
    assert set(verl) == {"score", "accuracy", "format"}
    assert verl["accuracy"] == pytest.approx(direct.accuracy, abs=EXACT), "verl adapter vs evr1_rewards.score"
    assert verl["format"] == direct.format
    assert verl["score"] == pytest.approx(direct.overall, abs=EXACT), "verl adapter's default weights differ"
    for conversational in (False, True):
        acc = _trl(case, "accuracy", conversational)
        overall = _trl(case, "overall", conversational)
        assert acc == pytest.approx(direct.accuracy, abs=EXACT), f"TRL accuracy (conversational={conversational})"
        assert overall == pytest.approx(direct.overall, abs=EXACT), f"TRL overall (conversational={conversational})"
    if "expect" in case:
        assert direct.accuracy == pytest.approx(case["expect"], abs=1e-9)
    # the verl adapter forwards `mode` like any reward kwarg: metric mode through it is evr1_rewards' metric mode
    metric = score(case["response"], case["truth"], case["problem_type"], options=case.get("options"), mode="metric")
    assert _verl(case, mode="metric")["accuracy"] == pytest.approx(metric.accuracy, abs=EXACT)
    if "expect_metric" in case:
        assert metric.accuracy == pytest.approx(case["expect_metric"], abs=1e-9)
        assert metric.accuracy != pytest.approx(direct.accuracy), "documented mode difference vanished: update table"
    else:
        assert metric.accuracy == pytest.approx(direct.accuracy, abs=EXACT), "train reward and eval metric disagree"


def _annotation_row(case: dict[str, Any]) -> dict[str, Any]:
    """The case as an EasyVideoR1 benchmark row (`solution` wrapped in <answer> tags, as those files write it)."""
    return {
        "problem_id": case["id"],
        "problem": "What happens in the video?",
        "problem_type": case["eval"]["type"],
        "options": case.get("options"),
        "solution": f"<answer>{case['truth']}</answer>",
        "path": f"{case['id']}.mp4",
        "data_type": "video",
    }


def _eval_scores(tmp_path: Path) -> dict[str, tuple[float, dict[str, Any]]]:
    """case id -> (evr1-eval's per-sample score, its row), for every case with an `eval` entry."""
    by_bench: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    for case in CASES:
        if "eval" in case:
            by_bench[case["eval"]["benchmark"]].append(case)
    out: dict[str, tuple[float, dict[str, Any]]] = {}
    for name, cases in by_bench.items():
        ann = tmp_path / f"{name or 'default'}.json"
        ann.write_text(json.dumps([_annotation_row(c) for c in cases]), encoding="utf-8")
        if name is not None:  # a registered benchmark: the real `evr1-eval score` command
            preds = tmp_path / f"{name}.preds.jsonl"
            preds.write_text("".join(json.dumps({"id": c["id"], "response": c["response"]}) + "\n" for c in cases))
            dest = tmp_path / f"scored-{name}"
            args = ["score", name, "--annotations", str(ann), "--predictions", str(preds), "--out", str(dest)]
            assert eval_main([*args, "--no-progress"]) == 0
            rows = [json.loads(x) for x in (dest / "results.jsonl").read_text().splitlines() if x.strip()]
            for row in rows:
                assert row["error"] is None, row
                assert row["details"]["evr1"]["scorer"] == "evr1-rewards", f"{name}: {row['id']} has no evr1 score"
                out[row["id"]] = (row["evr1_score"], row)
        else:  # types no registered benchmark scores with evr1: the default rule of a benchmark without one
            for case in cases:
                bench = Benchmark(name="parity", title="parity", problem_types=(case["eval"]["type"],))
                ann.write_text(json.dumps([_annotation_row(case)]), encoding="utf-8")
                loaded = bench.load(ann)
                assert not loaded.errors, loaded.errors
                (sample,) = loaded.samples
                row = bench.score(sample, case["response"])
                assert row.error is None, row
                assert row.details.get("scorer") == "evr1-rewards", row  # no official rule: both protocols agree
                assert row.evr1_score == row.score
                out[case["id"]] = (row.score, {"details": row.details})
    assert set(out) == {c["id"] for c in CASES if "eval" in c}
    return out


def test_eval_per_sample_score_agrees_with_training(tmp_path: Path) -> None:
    scores = _eval_scores(tmp_path)
    mismatches = []
    for case_id, (eval_score, _row) in sorted(scores.items()):
        case = BY_ID[case_id]
        metric = score(
            case["response"],
            case["truth"],
            case["problem_type"],
            options=case.get("options"),
            mode="metric",
        )
        train = _verl(case)["accuracy"]
        expected_train = case.get("expect_metric", train)  # where the table documents a metric convention
        if abs(eval_score - metric.accuracy) > EXACT or abs(eval_score - expected_train) > 1e-9:
            mismatches.append((case_id, {"eval": eval_score, "rewards_metric": metric.accuracy, "train": train}))
    assert not mismatches, f"evr1-eval and training disagree: {mismatches}"
