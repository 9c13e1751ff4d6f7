"""Differential tests: evr1-eval's official protocol against lmms-eval 0.7.3's REAL task functions (`nox -s eval_lmms`).

Samples are real annotation rows (tests/data/real_rows/: EasyVideoR1's files and TempCompass' release), loaded by
evr1-eval's loader; each sample's official document (`extras["official_doc"]`) is handed to lmms-eval's own
`process_results` (after lmms-eval's default reasoning-tag stripping, exactly as its scoring loop does) and its
aggregation functions. Per sample, the scores must be equal; per aggregation, every official breakdown must be equal.

- The tuned corpus (diff_corpus.py, generator A) must agree on every response.
- The held-out corpus (diff_corpus_heldout.py, generator B, written after the extractors were final) must agree on at
  least 99% per benchmark; the table is written to $EVR1_DIFF_REPORT (JSON) when set.

Official references outside lmms-eval reuse lmms-eval's copy of the same rules where it has one: TempCompass' rules
(called on the official scripts' input, `</s>` removed and stripped), OVO-Bench's scorer (lmms-eval ships
`OVOBenchScore.py` verbatim), VSI-Bench's MRA and first-token rules (thinking-in-space's composition of the same
functions). Random fallbacks are replaced on both sides by the same deterministic choice (the last option).
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import types
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lmms_eval", reason="needs lmms-eval 0.7.3 (--no-deps): nox -s eval_lmms")

import diff_corpus
import lmms_reference as lmms

from evr1_eval.api.base import Benchmark
from evr1_eval.benchmarks import get_benchmark
from evr1_eval.types import Reading, Sample, ScoredSample

pytestmark = pytest.mark.lmms_eval

DATA = Path(__file__).parent / "data" / "real_rows"
_TMP = Path(tempfile.mkdtemp(prefix="evr1-diff-"))  # the fixtures written as annotation files, one folder per run
#: Responses per sample (every family of its kind appears; >= 200 responses per benchmark).
PER_SAMPLE = 20
#: Responses in each aggregation round: one per sample, so per-sample keys (Charades-STA's) stay unique.
AGGREGATION_ROUNDS = 6


def last(seq: Sequence[str]) -> str:
    return list(seq)[-1]


class _LastChoice:
    """Replaces a reference module's `random` so its fallback draws the same option evr1-eval's stub draws."""

    def __getattr__(self, name: str) -> Any:
        import random

        return getattr(random, name)

    @staticmethod
    def choice(seq: Sequence[str]) -> str:
        return last(seq)


@pytest.fixture(autouse=True)
def _deterministic_fallbacks(monkeypatch: pytest.MonkeyPatch) -> None:
    import evr1_eval.api.extractors as ex
    import evr1_eval.benchmarks.longvideobench as lvb
    import evr1_eval.benchmarks.minerva as mi

    def stub(sample_id: str, choices: Sequence[str]) -> str:
        return last(choices)

    for module in (ex, lvb, mi):
        monkeypatch.setattr(module, "random_choice", stub)
    for task in ("longvideobench", "minerva", "video_holmes"):
        monkeypatch.setattr(lmms.task(task), "random", _LastChoice())
    mmvu = lmms.task("mmvu")

    def no_judge() -> Any:
        raise RuntimeError("no judge in the differential tests (the reference falls back to its rule)")

    monkeypatch.setattr(mmvu, "_get_pipeline", no_judge)
    tempcompass = lmms.task("tempcompass")

    def no_chatgpt(*args: Any, **kwargs: Any) -> str:
        raise ConnectionError("no ChatGPT in the differential tests")

    monkeypatch.setattr(tempcompass, "get_llm_output", no_chatgpt)
    monkeypatch.setattr(tempcompass, "time", types.SimpleNamespace(sleep=lambda seconds: None))


# -- loading the real rows ----------------------------------------------------------------------------------------
def load_samples(name: str) -> list[Sample]:
    bench = get_benchmark(name)
    fixture = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    if name == "tempcompass":
        samples: list[Sample] = []
        tmp = _TMP / "tempcompass"
        tmp.mkdir(parents=True, exist_ok=True)
        for fmt, document in fixture["documents"].items():
            path = tmp / f"{fmt}.json"
            path.write_text(json.dumps(document), encoding="utf-8")
            loaded = bench.load(path)
            assert not loaded.errors, loaded.errors
            samples += loaded.samples
        return samples
    path = _TMP / f"{name}.json"
    path.write_text(json.dumps(fixture["rows"]), encoding="utf-8")
    loaded = bench.load(path)
    assert not loaded.errors, loaded.errors
    return loaded.samples


def doc(sample: Sample) -> dict[str, Any]:
    return dict(sample.extras["official_doc"])


def context(bench: str, sample: Sample) -> diff_corpus.Context:
    d = doc(sample)
    if bench == "charades_sta":
        span = d["timestamp"]
        return diff_corpus.Context("span", span=(float(span[0]), float(span[1])))
    if bench == "tempcompass" and d["format"] == "caption_matching":
        lines = str(d["question"]).split("\n")[1:]
        return diff_corpus.Context(
            "caption",
            labels=tuple(x.split(": ")[0] for x in lines),
            sentences=tuple(x.split(": ", 1)[1] for x in lines),
        )
    truth = str(sample.ground_truth)
    if sample.problem_type == "boolean":
        return diff_corpus.Context("yesno", truth=truth.capitalize())
    if bench == "ovobench" and sample.problem_type == "numerical":  # REC: repetition counting
        return diff_corpus.Context("count", truth=truth)
    if sample.problem_type in ("numerical", "regression"):
        return diff_corpus.Context("number", truth=truth)
    if sample.problem_type == "open_ended":
        return diff_corpus.Context("open", truth=truth)
    letters = str(sample.extras.get("option_letters") or "ABCD")
    options = tuple(o.split(". ", 1)[1] if ". " in o else o for o in sample.options)
    return diff_corpus.Context("mc", truth=truth, letters=letters, options=options)


# -- the reference, per benchmark: (sample, response) -> score, and rows -> official breakdowns ------------------------
def _s(response: str) -> str:
    """lmms-eval's scoring loop before `process_results`, with its default `--reasoning_tags` (the reasoning-tag tests
    below replace it by the raw response: `--reasoning_tags none`)."""
    return lmms.strip_reasoning_tags(response)


def ref_lvbench(sample: Sample, response: str) -> float:
    return float(
        lmms.task("lvbench").lvbench_process_results({"answer": sample.ground_truth}, [_s(response)])["lvbench_score"]
    )


def _mlvu_doc(sample: Sample) -> dict[str, Any]:
    d = doc(sample)
    return {"question": d["question"], "task_type": d["task_type"], "answer": d["answer"]}


def ref_mlvu(sample: Sample, response: str) -> float:
    out = lmms.task("mlvu").mlvu_process_results(_mlvu_doc(sample), [_s(response)])["mlvu_percetion_score"]
    return float(out["pred_answer"] == out["answer"])


def agg_mlvu(pairs: Sequence[tuple[Sample, str]]) -> dict[str, float]:
    mod = lmms.task("mlvu")
    results = [mod.mlvu_process_results(_mlvu_doc(s), [_s(r)])["mlvu_percetion_score"] for s, r in pairs]
    return {"m_avg": mod.mlvu_aggregate_results_dev(results)}


def _lvb_doc(sample: Sample) -> dict[str, Any]:
    return {**doc(sample), "id": sample.id}


def ref_longvideobench(sample: Sample, response: str) -> float:
    out = lmms.task("longvideobench").longvideobench_process_results(_lvb_doc(sample), [_s(response)])["lvb_acc"]
    return float(out["parsed_pred"] == out["answer"])


def agg_longvideobench(pairs: Sequence[tuple[Sample, str]]) -> dict[str, float]:
    mod = lmms.task("longvideobench")
    results = [mod.longvideobench_process_results(_lvb_doc(s), [_s(r)])["lvb_acc"] for s, r in pairs]
    return {"accuracy": 100 * mod.longvideobench_aggregate_results(results)}


def _minerva_doc(sample: Sample) -> dict[str, Any]:
    return {**doc(sample), "key": sample.id}


def ref_minerva(sample: Sample, response: str) -> float:
    return float(
        lmms.task("minerva").minerva_process_results(_minerva_doc(sample), [_s(response)])["minerva_acc"]["score"]
    )


def agg_minerva(pairs: Sequence[tuple[Sample, str]]) -> dict[str, float]:
    mod = lmms.task("minerva")
    results = [mod.minerva_process_results(_minerva_doc(s), [_s(r)])["minerva_acc"] for s, r in pairs]
    return {"accuracy": mod.minerva_aggregate_results(results)}


def _mmvu_doc(sample: Sample) -> dict[str, Any]:
    d = doc(sample)
    return {**d, "id": sample.id, "video_path": f"videos/{d['category']}/0.mp4"}


def ref_mmvu(sample: Sample, response: str) -> float:
    return float(lmms.task("mmvu").mmvu_process_results(_mmvu_doc(sample), [_s(response)])["accuracy"]["correct"])


def agg_mmvu(pairs: Sequence[tuple[Sample, str]]) -> dict[str, float]:
    mod = lmms.task("mmvu")
    results = [mod.mmvu_process_results(_mmvu_doc(s), [_s(r)])["accuracy"] for s, r in pairs]
    return {"accuracy_judge_failed_as_wrong|accuracy": mod.mmvu_aggregate_results_val(results)}


def ref_motionbench(sample: Sample, response: str) -> float:
    out = lmms.task("motionbench").motionbench_process_results(doc(sample), [_s(response)])
    return float(out["motionbench_acc"]["score"])


def agg_motionbench(pairs: Sequence[tuple[Sample, str]]) -> dict[str, float]:
    mod = lmms.task("motionbench")
    outs = [mod.motionbench_process_results(doc(s), [_s(r)]) for s, r in pairs]
    return {
        "accuracy": 100 * mod.motionbench_aggregate_acc([o["motionbench_acc"] for o in outs]),
        "answered_rate": 100 * mod.motionbench_aggregate_answered_rate([o["motionbench_answered_rate"] for o in outs]),
    }


def ref_mvbench(sample: Sample, response: str) -> float:
    return float(lmms.task("mvbench").mvbench_process_results(doc(sample), [_s(response)])["mvbench_accuracy"]["score"])


def agg_mvbench(pairs: Sequence[tuple[Sample, str]]) -> dict[str, float]:
    mod = lmms.task("mvbench")
    results = [mod.mvbench_process_results(doc(s), [_s(r)])["mvbench_accuracy"] for s, r in pairs]
    return {"accuracy": mod.mvbench_aggregate_results(results)}


def _video_holmes(sample: Sample, response: str) -> dict[str, Any]:
    return dict(lmms.task("video_holmes").video_holmes_process_results(doc(sample), [_s(response)]))


def ref_video_holmes(sample: Sample, response: str) -> float:
    return float(_video_holmes(sample, response)["video_holmes_accuracy"]["score"])


def agg_video_holmes(pairs: Sequence[tuple[Sample, str]]) -> dict[str, float]:
    mod = lmms.task("video_holmes")
    results = [_video_holmes(s, r)["video_holmes_accuracy"] for s, r in pairs]
    out = {"accuracy": mod.video_holmes_aggregate_accuracy(results)}
    for qtype in mod.QUESTION_TYPES:
        if any(r["question_type"] == qtype for r in results):
            out[f"type/{qtype}"] = mod._aggregate_by_question_type(results, qtype)
    return out


def _vmqa_doc(sample: Sample) -> dict[str, Any]:
    d = doc(sample)
    question = sample.groups.get("question", sample.id)
    return {**d, "question_id": question, "category": sample.groups["category"], "length": sample.groups["length"]}


def ref_videomathqa(sample: Sample, response: str) -> float:
    out = lmms.task("videomathqa").videomathqa_process_results(_vmqa_doc(sample), [_s(response)])
    data = out["videomathqa_perception_score"]
    return float(data["pred_answer"] == data["answer"])


def agg_videomathqa(pairs: Sequence[tuple[Sample, str]]) -> dict[str, float]:
    mod = lmms.task("videomathqa")
    results = {
        key: [mod.videomathqa_process_results(_vmqa_doc(s), [_s(r)])["videomathqa_perception_score"]
              for s, r in pairs if ("mbin" in s.groups) == (key == "mbin")]
        for key in ("mcq", "mbin")
    }  # fmt: skip
    return {
        "mcq_accuracy": mod.videomathqa_mcq_aggregate_results(results["mcq"]),
        "mbin_accuracy": mod.videomathqa_multi_binary_aggregate_results(results["mbin"]),
    }


def _mmmu_acc(sample: Sample, response: str) -> dict[str, Any]:
    d = doc(sample)
    their = {"id": d["id"], "question_type": d["question_type"], "options": d["options"], "answer": d["answer"]}
    return dict(lmms.task("videommmu").videommmu_process_results(their, [_s(response)])["mmmu_acc"])


def ref_videommmu(sample: Sample, response: str) -> float:
    acc = _mmmu_acc(sample, response)
    if acc["parsed_pred"] == "API Error":
        return -1.0  # outside the denominator; evr1-eval marks it `api_error`
    judged, _ = lmms.task("videommmu").evaluate_videommmu([acc])
    return float(judged[acc["id"]] == "Correct")


def agg_videommmu(pairs: Sequence[tuple[Sample, str]]) -> dict[str, float]:
    results = [_mmmu_acc(s, r) for s, r in pairs]
    return {"accuracy": 100 * lmms.task("videommmu").videommmu_aggregate_results(results)}


def _vsi_metric(sample: Sample, response: str) -> tuple[str, float]:
    """thinking-in-space's `vsibench_process_results`, composed of lmms-eval's copies of the same functions."""
    mod = lmms.task("vsibench")
    gt = str(doc(sample)["ground_truth"])
    if sample.problem_type == "multiple_choice":
        return "accuracy", float(mod.exact_match(mod.fuzzy_matching(response), gt))
    try:
        value = mod.mean_relative_accuracy(
            mod.to_float(mod.fuzzy_matching(response)), mod.to_float(gt), 0.5, 0.95, 0.05
        )
    except TypeError:
        value = 0.0
    return "MRA:.5:.95:.05", float(value)


def ref_vsibench(sample: Sample, response: str) -> float:
    return _vsi_metric(sample, response)[1]


def agg_vsibench(pairs: Sequence[tuple[Sample, str]]) -> dict[str, float]:
    rows = []
    for s, r in pairs:
        key, value = _vsi_metric(s, r)
        rows.append({"question_type": s.groups["task"], key: value})
    return {"overall": 100 * float(lmms.task("vsibench")._compute_all_subscores(rows)["overall"])}


def _charades_key(sample: Sample) -> str:
    d = doc(sample)
    return f"{d['video']}>>>{d['caption']}>>>{d['timestamp']}"


def ref_charades_sta(sample: Sample, response: str) -> float:
    return float(
        lmms.task("charades_sta")._temporal_grounding_compute_metrics([{_charades_key(sample): _s(response)}])["mIOU"]
        / 100
    )


def agg_charades_sta(pairs: Sequence[tuple[Sample, str]]) -> dict[str, float]:
    m = lmms.task("charades_sta")._temporal_grounding_compute_metrics([{_charades_key(s): _s(r)} for s, r in pairs])
    return {"miou": m["mIOU"], "r@0.3": m["IOU@3"], "r@0.5": m["IOU@5"], "r@0.7": m["IOU@7"]}


def _ovo_scores(pairs: Sequence[tuple[Sample, str]]) -> dict[str, list[float]]:
    score = lmms.module("lmms_eval.tasks.ovobench.score_utils.score")
    back, forward = [], []
    for s, r in pairs:
        task = s.groups["task"]
        if s.problem_type == "multiple_choice":
            back.append({"task": task, "response": r, "ground_truth": str(s.ground_truth)})
        elif task == "REC":
            forward.append({"task": task, "test_info": [{"response": r, "count": int(s.ground_truth)}]})
        else:  # SSR / CRR: the release's `type` is 1 for a "Yes" truth
            forward.append({"task": task, "test_info": [{"response": r, "type": int(s.ground_truth == "yes")}]})
    out: dict[str, list[float]] = defaultdict(list)
    for results, fn in ((back, score.calculate_score_backward_realtime), (forward, score.calculate_score_forward)):
        if results:
            for task, values in fn(results)[1].items():
                out[task] += [float(v) for v in values]
    return out


def ref_ovobench(sample: Sample, response: str) -> float:
    (values,) = _ovo_scores([(sample, response)]).values()
    return values[0]


def agg_ovobench(pairs: Sequence[tuple[Sample, str]]) -> dict[str, float]:
    """OVOBenchScore.score(): per-task mean -> mean per category -> mean of the three categories."""
    scores = _ovo_scores(pairs)
    category = {s.groups["task"]: s.groups["category"] for s, _ in pairs}
    per_cat: dict[str, list[float]] = defaultdict(list)
    for task, values in scores.items():
        per_cat[category[task]].append(sum(values) / len(values))
    means = [100 * sum(v) / len(v) for v in per_cat.values()]
    return {"overall": sum(means) / len(means)}


def _tempcompass(sample: Sample, response: str) -> dict[str, Any]:
    mod = lmms.task("tempcompass")
    d = doc(sample)
    their = {"question": d["question"], "answer": d["answer"], "video_id": sample.id, "dim": d["dim"]}
    pred = response.replace("</s>", "").strip()  # the official scripts' preprocessing
    fn = {"multi-choice": mod.tempcompass_process_results_multi_choice, "yes_no": mod.tempcompass_process_results_yes_no,
          "caption_matching": mod.tempcompass_process_results_caption_matching}[d["format"]]  # fmt: skip
    return dict(fn(their, [pred])["avg_accuracy"])


def ref_tempcompass(sample: Sample, response: str) -> tuple[float, bool]:
    out = _tempcompass(sample, response)
    return float(out["rating"]), not out["match_success"]


def agg_tempcompass(pairs: Sequence[tuple[Sample, str]]) -> dict[str, float]:
    mod = lmms.task("tempcompass")
    by_format: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s, r in pairs:
        by_format[doc(s)["format"]].append(_tempcompass(s, r))
    return {f"format/{fmt}": mod.tempcompass_aggregate_rating(results, None) for fmt, results in by_format.items()}


@dataclass(frozen=True)
class Reference:
    per_sample: Callable[[Sample, str], Any]
    aggregate: Callable[[Sequence[tuple[Sample, str]]], dict[str, float]] | None = None
    #: evr1-eval's side of one comparison (default: the official score).
    ours: Callable[[Benchmark, Sample, str], Any] = field(default=lambda b, s, r: b.score(s, r).score)


def _ours_videommmu(bench: Benchmark, sample: Sample, response: str) -> float:
    row = bench.score(sample, response)
    return -1.0 if row.details.get("api_error") else row.score


def _ours_tempcompass(bench: Benchmark, sample: Sample, response: str) -> tuple[float, bool]:
    row = bench.score(sample, response)
    return row.score, row.needs_judge


REFERENCES: dict[str, Reference] = {
    "lvbench": Reference(ref_lvbench),
    "mlvu": Reference(ref_mlvu, agg_mlvu),
    "longvideobench": Reference(ref_longvideobench, agg_longvideobench),
    "minerva": Reference(ref_minerva, agg_minerva),
    "mmvu": Reference(ref_mmvu, agg_mmvu),
    "motionbench": Reference(ref_motionbench, agg_motionbench),
    "mvbench": Reference(ref_mvbench, agg_mvbench),
    "video_holmes": Reference(ref_video_holmes, agg_video_holmes),
    "videomathqa": Reference(ref_videomathqa, agg_videomathqa),
    "videommmu": Reference(ref_videommmu, agg_videommmu, _ours_videommmu),
    "vsibench": Reference(ref_vsibench, agg_vsibench),
    "charades_sta": Reference(ref_charades_sta, agg_charades_sta),
    "ovobench": Reference(ref_ovobench, agg_ovobench),
    "tempcompass": Reference(ref_tempcompass, agg_tempcompass, _ours_tempcompass),
}


# -- comparisons --------------------------------------------------------------------------------------------------
def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=0, abs_tol=1e-9)
    return bool(a == b)


def corpus(bench: str, samples: Sequence[Sample], generator: str) -> list[tuple[Sample, str]]:
    if generator == "tuned":
        families, seed = diff_corpus.GENERATORS, 0
    else:
        import diff_corpus_heldout

        families, seed = diff_corpus_heldout.GENERATORS, 1
    pairs = []
    for s in samples:
        pairs += [(s, r) for r in diff_corpus.responses(context(bench, s), seed, PER_SAMPLE, families)]
    return pairs


def compare(bench_name: str, generator: str) -> tuple[int, list[tuple[str, str, Any, Any]]]:
    bench = get_benchmark(bench_name)
    ref = REFERENCES[bench_name]
    pairs = corpus(bench_name, load_samples(bench_name), generator)
    mismatches = []
    for sample, response in pairs:
        theirs, ours = ref.per_sample(sample, response), ref.ours(bench, sample, response)
        if not _equal(theirs, ours):
            mismatches.append((sample.id, response, theirs, ours))
    return len(pairs), mismatches


@pytest.mark.parametrize("bench_name", sorted(REFERENCES))
def test_tuned_corpus_agrees_on_every_response(bench_name: str) -> None:
    total, mismatches = compare(bench_name, "tuned")
    assert total >= 200
    assert not mismatches, f"{len(mismatches)}/{total} disagree, e.g. {mismatches[:5]}"


@pytest.mark.parametrize("bench_name", sorted(REFERENCES))
def test_heldout_corpus_agreement(bench_name: str) -> None:
    total, mismatches = compare(bench_name, "heldout")
    agreement = 1 - len(mismatches) / total
    report = os.environ.get("EVR1_DIFF_REPORT")
    if report:
        path = Path(report)
        data = json.loads(path.read_text()) if path.exists() else {}
        bench = get_benchmark(bench_name)
        data[bench_name] = {
            "reference": str(bench.reference),
            "responses": total,
            "agree": total - len(mismatches),
            "agreement": round(100 * agreement, 2),
            "mismatches": [[i, r[:160], str(t), str(o)] for i, r, t, o in mismatches[:20]],
        }
        path.write_text(json.dumps(data, indent=1, ensure_ascii=False))
    assert total >= 200
    assert agreement >= 0.99, f"{len(mismatches)}/{total} disagree, e.g. {mismatches[:5]}"


def _our_rows(bench: Benchmark, pairs: Sequence[tuple[Sample, str]]) -> list[ScoredSample]:
    rows = []
    for sample, response in pairs:
        row = bench.score(sample, response)
        rows.append(row)
    return rows


@pytest.mark.parametrize("bench_name", sorted(n for n, r in REFERENCES.items() if r.aggregate is not None))
def test_aggregation_is_identical_on_every_breakdown(bench_name: str) -> None:
    bench = get_benchmark(bench_name)
    ref = REFERENCES[bench_name]
    assert ref.aggregate is not None
    samples = load_samples(bench_name)
    pairs = corpus(bench_name, samples, "tuned")
    per_sample = len(pairs) // len(samples)
    checked = 0
    for k in range(AGGREGATION_ROUNDS):
        chosen = pairs[k % per_sample :: per_sample]  # the k-th response of every sample
        theirs = ref.aggregate(chosen)
        rows = _our_rows(bench, chosen)
        if bench_name == "tempcompass":  # the reference without its judge (--disable_llm): unmatched answers are 0
            rows = [replace(r, needs_judge=False) for r in rows]
        summary = bench.aggregate(rows)
        for key, value in theirs.items():
            names = key.split("|")
            ours = next((summary.metrics[n] for n in names if n in summary.metrics), None)
            assert ours is not None, f"{bench_name}: {key} missing from {sorted(summary.metrics)}"
            assert ours == pytest.approx(value, abs=1e-3), f"{bench_name} round {k}: {key}"
            checked += 1
    assert checked >= AGGREGATION_ROUNDS


# -- the `<answer>` reading (`answer_tags`): official = the reference on the raw response, read = it on the tag -----
def _tagged(c: diff_corpus.Context) -> list[str]:
    """Answers in `<answer>` tags with another option named outside them, where a reference that reads the whole
    response may read the other option."""
    other = next(x for x in c.letters if x != c.truth)
    return [
        f"Let me think... <answer>{c.truth}</answer> so {other} is wrong",
        f"{other} looked right at first, but <answer>{c.truth}</answer>",
        f"<think>{other} or {c.truth}?</think>\n<answer>{c.truth}</answer>\nOption {other} does not fit.",
        f"<answer>({c.truth})</answer> rather than ({other})",
    ]


@dataclass(frozen=True)
class _ReadTags:
    """A benchmark scored with `answer_tags="read"`, for the reference's `ours` projection."""

    bench: Benchmark

    def score(self, sample: Sample, response: str) -> ScoredSample:
        return self.bench.score(sample, response, reading=Reading(answer_tags="read"))


@pytest.mark.parametrize("bench_name", sorted(n for n in REFERENCES if n != "charades_sta"))
def test_answer_tags_official_is_the_reference_on_the_response_and_read_on_the_tag(bench_name: str) -> None:
    """Default: the official score of a tagged answer is the reference's own reading of the whole response. With
    `answer_tags="read"`: it is the reference's reading of the final tag's content (evr1-rewards' definition)."""
    from evr1_rewards import Response

    bench = get_benchmark(bench_name)
    ref = REFERENCES[bench_name]
    checked = differ = 0
    for sample in load_samples(bench_name):
        c = context(bench_name, sample)
        if c.kind != "mc":
            continue
        for response in _tagged(c):
            official = ref.per_sample(sample, response)
            assert _equal(official, ref.ours(bench, sample, response)), (sample.id, response)
            tag = Response(response).answer_tag
            assert tag is not None
            read = ref.per_sample(sample, tag)
            assert _equal(read, ref.ours(_ReadTags(bench), sample, response)), (sample.id, response)  # type: ignore[arg-type]
            checked += 1
            differ += not _equal(official, read)
    assert checked >= 20
    assert differ or bench_name in _SAME_READING, f"{bench_name}: no response read differently: a vacuous check"


#: References that read every tagged response above as its tag (MMVU's lenient rule and OVO-Bench's accept the ground
#: truth letter anywhere): the check still pins both readings to the reference.
_SAME_READING = frozenset({"mmvu", "ovobench"})


# -- reasoning blocks (`reasoning_tags`): official = each reference's pipeline, keep = raw, strip = lmms-eval's strip ---
def _reasoned(c: diff_corpus.Context) -> list[str]:
    """Answers around reasoning blocks that name another option (or the truth), where the reference scores the
    stripped and the raw response differently (every reference here does on some of them)."""
    other = next(x for x in c.letters if x != c.truth)
    return [
        f"<think>Option {other} looks plausible.</think><think>Re-checking.</think>{c.truth}",
        f"<think>{other}</think>\nThe answer is {c.truth}",
        f"<analysis>({other}) fits.</analysis> ({c.truth})",
        f"Thinking: {other} is tempting...</think>{c.truth}",  # a prefilled start tag: only the end tag is left
        f"{c.truth}. <think>not {other}</think>",
        f"<think>Option {other}) fits.</think>So {c.truth} it is",  # a marked letter only inside the reasoning
        f"<think>Maybe ({c.truth})?</think>{other}",  # the truth only inside the reasoning
    ]


def _no_reasoning_strip(response: str) -> str:
    """lmms-eval's scoring loop with `--reasoning_tags none`: `process_results` receives the raw response."""
    return response


@dataclass(frozen=True)
class _Read:
    """A benchmark scored with a given `Reading`, for the reference's `ours` projection."""

    bench: Benchmark
    reading: Reading

    def score(self, sample: Sample, response: str) -> ScoredSample:
        return self.bench.score(sample, response, reading=self.reading)


@pytest.mark.parametrize("mode", ["official", "keep", "strip"])
@pytest.mark.parametrize("bench_name", sorted(n for n in REFERENCES if n != "charades_sta"))
def test_reasoning_tags_official_keep_and_strip_are_the_reference_on_that_text(
    bench_name: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Default: the reference's own pipeline (lmms-eval's tasks strip, the other official scripts read the raw text).
    `keep`: every reference's task function on the raw response (lmms-eval `--reasoning_tags none`). `strip`: every
    reference's task function on lmms-eval's real `strip_reasoning_tags` output."""
    bench = get_benchmark(bench_name)
    ref = REFERENCES[bench_name]
    reading = Reading(reasoning_tags=mode)  # type: ignore[arg-type]
    if mode != "official":
        monkeypatch.setattr(sys.modules[__name__], "_s", _no_reasoning_strip)
    stripped = lmms.strip_reasoning_tags
    pre = stripped if mode == "strip" else _no_reasoning_strip
    checked = differ = 0
    for sample in load_samples(bench_name):
        c = context(bench_name, sample)
        if c.kind != "mc":
            continue
        for response in _reasoned(c):
            theirs = ref.per_sample(sample, pre(response))
            assert _equal(theirs, ref.ours(_Read(bench, reading), sample, response)), (sample.id, response)  # type: ignore[arg-type]
            checked += 1
            if mode != "official":  # the reference on the raw response against it on the stripped one
                differ += not _equal(ref.per_sample(sample, stripped(response)), ref.per_sample(sample, response))
    assert checked >= 20
    if mode != "official":
        assert differ, f"{bench_name}: stripping changed no score: a vacuous check"


def test_videomme_strip_is_the_official_extractor_on_lmms_evals_stripped_text(tmp_path: Path) -> None:
    """Video-MME's script reads the raw response (the default and `keep`); under `strip` its extractor reads the text
    lmms-eval's real `strip_reasoning_tags` leaves (rows: the LVBench fixture's 4-option questions)."""
    from evr1_eval.benchmarks import videomme

    bench = get_benchmark("videomme")
    path = tmp_path / "videomme.json"
    path.write_text(json.dumps(json.loads((DATA / "lvbench.json").read_text(encoding="utf-8"))["rows"]))
    loaded = bench.load(path)
    assert not loaded.errors, loaded.errors
    checked = differ = 0
    for sample in loaded.samples:
        for response in _reasoned(context("videomme", sample)):
            stripped = lmms.strip_reasoning_tags(response)
            truth = str(sample.ground_truth)
            for mode, text in (("official", response), ("keep", response), ("strip", stripped)):
                row = bench.score(sample, response, reading=Reading(reasoning_tags=mode))  # type: ignore[arg-type]
                letter = videomme.extract(sample, text)
                assert (row.extracted, row.score) == (letter, float(letter == truth)), (sample.id, mode, response)
            checked += 1
            differ += videomme.extract(sample, stripped) != videomme.extract(sample, response)
    assert checked >= 20
    assert differ


# -- long responses: over the old 100,000-character scan limit (a thinking model's 32K-token answer) ------------------
def _long(c: diff_corpus.Context) -> list[str]:
    """Answers longer than `STRIP_SCAN` whose head and tail name different options, with and without reasoning tags
    (a truncated thinking answer has no end tag): first-match, last-match and priority rules must all read them whole."""
    from evr1_eval.api.extractors import STRIP_SCAN

    other = next(x for x in c.letters if x != c.truth)
    filler = "z " * (STRIP_SCAN // 2 + 10)
    return [
        f"{c.truth}. {filler}{other}",
        f"{c.truth} {filler}\n{other}",
        f"<think>{other} {filler}</think>{c.truth}",
        f"<think>{c.truth} {filler}{other}",
    ]


@pytest.mark.parametrize("bench_name", sorted(n for n in REFERENCES if n != "charades_sta"))
def test_long_responses_agree(bench_name: str) -> None:
    bench = get_benchmark(bench_name)
    ref = REFERENCES[bench_name]
    checked = 0
    for sample in load_samples(bench_name):
        c = context(bench_name, sample)
        if c.kind != "mc" or checked >= 40:
            continue
        for response in _long(c):
            theirs, ours = ref.per_sample(sample, response), ref.ours(bench, sample, response)
            assert _equal(theirs, ours), (sample.id, response[:40], response[-40:], theirs, ours)
            checked += 1
    assert checked >= 20


def test_reference_is_the_pinned_release() -> None:
    assert lmms.version() == "0.7.3"


def test_reference_functions_are_the_real_ones() -> None:
    """Guard against a stub hiding the code under comparison: every task module is the installed file."""
    for name in ("lvbench", "mlvu", "mvbench", "charades_sta", "videommmu", "vsibench", "tempcompass"):
        module = lmms.task(name)
        assert Path(module.__file__).parts[-3:] == ("tasks", name, "utils.py")
        assert "site-packages" in module.__file__ or "lmms_eval" in module.__file__
    mcq = lmms.module("lmms_eval.tasks._task_utils.mcq_extract")
    assert mcq.extract_mcq_answer("The correct answer is (B).") == "B"
