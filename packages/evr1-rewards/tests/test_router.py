"""Router contract: weights, strictness on ground truth / types, explicit fallbacks, registry behaviour."""

from __future__ import annotations

import logging

import pytest

from evr1_rewards import (
    GroundTruthError,
    RewardConfigError,
    RewardInput,
    RewardResult,
    RewardRouter,
    UnknownProblemTypeError,
    available_types,
    get_scorer,
    normalize_problem_type,
    register,
    score,
)
from evr1_rewards.registry import describe_types

ALL_TYPES = {
    "boolean", "code", "math", "multiple_choice", "numerical", "ocr", "open_ended", "preference", "regression",
    "segmentation", "spatial_grounding", "spatiotemporal_grounding", "temporal_grounding", "tracking",
}  # fmt: skip


def test_every_type_is_registered() -> None:
    assert ALL_TYPES <= set(available_types())


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("multiple choice", "multiple_choice"),  # EasyVideoR1 Jinja key
        ("Multiple-Choice", "multiple_choice"),  # case and hyphen
        ("spatial-temporal grounding", "spatiotemporal_grounding"),  # EasyVideoR1 key
        ("binary classification", "boolean"),
        ("llava", "preference"),
        ("critic", "preference"),
        ("coding", "code"),
        ("mathematics", "math"),
        ("number", "numerical"),
        ("video qa", "open_ended"),
        ("free-form", "open_ended"),
        ("OCR", "ocr"),
        ("segmentation_video", "segmentation"),
    ],
)
def test_aliases(name: str, canonical: str) -> None:
    assert normalize_problem_type(name) == canonical


EASYVIDEOR1_NAMES = [
    "multiple choice", "multiple_choice", "numerical", "number", "regression", "boolean", "binary classification",
    "ocr", "OCR", "math", "mathematics", "temporal grounding", "spatial-temporal grounding", "spatial grounding",
    "tracking", "code", "coding", "llava", "critic", "open-ended", "open_ended", "video qa", "video description",
    "free-form", "caption", "segmentation", "segmentation_image", "segmentation_video",
]  # fmt: skip


def test_every_easyvideor1_name_resolves() -> None:
    # svg-code / html-code are deliberately absent: EasyVideoR1 scores them by tag overlap, nothing verifiable.
    for name in EASYVIDEOR1_NAMES:
        assert normalize_problem_type(name) in ALL_TYPES, name
    with pytest.raises(UnknownProblemTypeError):
        normalize_problem_type("svg-code")


def test_unknown_type_raises_with_suggestion() -> None:
    with pytest.raises(UnknownProblemTypeError, match="Did you mean 'tracking'"):
        score("<answer>x</answer>", "x", "trackin")


def test_unknown_type_fallback_is_an_explicit_opt_in() -> None:
    router = RewardRouter(on_unknown="open_ended")
    res = router.score(RewardInput(response="<answer>a cat</answer>", ground_truth="a cat", problem_type="captioning?"))
    assert res.problem_type == "open_ended"
    assert res.accuracy == 1.0


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"accuracy": 0.9, "format": 0.2}, "sum to 1"),  # does not sum to 1
        ({"accuracy": 1.2, "format": -0.2}, r"in \[0, 1\]"),  # out of range
        ({"acc": 1.0}, "unknown reward weight"),  # typo
        ({"accuracy": float("nan"), "format": 0.1}, r"in \[0, 1\]"),  # NaN
    ],
)
def test_bad_weights(weights: dict, message: str) -> None:
    with pytest.raises(RewardConfigError, match=message):
        RewardRouter(weights)


def test_overall_is_the_weighted_sum() -> None:
    r = RewardRouter({"accuracy": 0.7, "format": 0.3})
    res = r.score(RewardInput(response="<answer>B</answer>", ground_truth="A", problem_type="mcq"))
    assert (res.accuracy, res.format, res.overall) == (0.0, 1.0, pytest.approx(0.3))
    assert score("B", "B", "mcq", weights={"accuracy": 1.0}).overall == 1.0  # format weight derived as 0


@pytest.mark.parametrize(
    ("ptype", "gt", "message"),
    [
        ("mcq", "Z", "not one of the option letters"),  # letter outside A-J
        ("numerical", "lots", "does not contain a number"),
        ("temporal_grounding", '{"time": [5, 1]}', "reversed"),
        ("temporal_grounding", "{not json", "not valid JSON"),
        ("spatial_grounding", "[1, 1, 1, 5]", "no area"),
        ("boolean", "perhaps", "not yes/no"),
        ("tracking", '{"boxes": {}}', "tracking ground truth"),
        ("code", "[]", "no tests"),
        ("segmentation", '{"size": [4, 4], "counts": [20]}', "more than"),
        ("preference", "Response 3", "not 'Response 1'"),
        ("mcq", None, "missing"),
        ("spatial_grounding", "[0, 0, 5, 5]", "image_size"),  # conventions differ without a size (extras below)
    ],
)
def test_bad_ground_truth_raises_naming_the_sample(ptype: str, gt: object, message: str) -> None:
    extras = {"pred_box_format": "norm1000"} if message == "image_size" else {}
    router = RewardRouter()
    with pytest.raises(GroundTruthError, match=message) as info:
        router.score(
            RewardInput(
                response="<answer>x</answer>", ground_truth=gt, problem_type=ptype, extras=extras, sample_id="row-17"
            )
        )
    assert "row-17" in str(info.value)


def test_on_error_zero_logs_and_continues(caplog: pytest.LogCaptureFixture) -> None:
    router = RewardRouter(on_error="zero")
    with caplog.at_level(logging.WARNING):
        out = router.score_batch(
            [
                RewardInput(response="<answer>B</answer>", ground_truth="B", problem_type="mcq"),
                RewardInput(
                    response="<answer>B</answer>", ground_truth="??", problem_type="numerical", sample_id="bad"
                ),
            ]
        )
    assert [r.overall for r in out] == [1.0, 0.0]
    assert "bad" in caplog.text
    assert "error" in out[1].details


def test_score_batch_keeps_order_with_parallel_types() -> None:
    router = RewardRouter(workers=3)
    batch = [
        RewardInput(
            response="<answer>print(input())</answer>",
            ground_truth='[{"input": "7", "output": "7"}]',
            problem_type="code",
        ),
        RewardInput(response="<answer>C</answer>", ground_truth="B", problem_type="mcq"),
        RewardInput(
            response="<answer>print(1)</answer>", ground_truth='[{"input": "", "output": "2"}]', problem_type="code"
        ),
    ]
    assert [r.accuracy for r in router.score_batch(batch)] == [1.0, 0.0, 0.0]


def test_result_is_frozen_and_as_dict_has_fixed_keys() -> None:
    res = score("<answer>B</answer>", "B", "mcq")
    assert isinstance(res, RewardResult)
    assert set(res.as_dict()) == {"overall", "accuracy", "format"}
    with pytest.raises(AttributeError):
        res.overall = 0.0  # type: ignore[misc]


def test_register_refuses_duplicates_and_alias_clashes() -> None:
    with pytest.raises(RewardConfigError, match="already registered"):
        register("multiple_choice")(type("X", (), {}))
    with pytest.raises(RewardConfigError, match="already registered"):
        register("brand_new_type", aliases=("mcq",))(type("Y", (), {}))
    assert "brand_new_type" not in available_types()


def test_register_custom_scorer_roundtrip() -> None:
    from evr1_rewards.types import Outcome

    @register("evr1_test_exact", aliases=("evr1 test exact alias",))
    class Exact:
        """Exact string match (test scorer)."""

        def parse_truth(self, gt, extras):  # type: ignore[no-untyped-def]
            return str(gt)

        def score(self, response, truth, ctx):  # type: ignore[no-untyped-def]
            return Outcome(float(response.extraction().text == truth), True)

    assert get_scorer("EVR1 test exact alias").parse_truth(1, {}) == "1"
    assert score("<answer>ok</answer>", "ok", "evr1_test_exact").overall == 1.0
    assert any(i.name == "evr1_test_exact" and i.description.startswith("Exact") for i in describe_types())


def test_math_reports_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from evr1_rewards import MissingExtraError
    from evr1_rewards.scorers import math as math_scorer

    monkeypatch.setattr(math_scorer, "math_verify_available", lambda: False)
    assert score("<answer>0.5</answer>", "0.5", "math").accuracy == 1.0  # plain numbers need no extra
    assert score("<answer>\\frac{1}{2}</answer>", "0.5", "math").accuracy == 1.0  # nor numeric fractions
    with pytest.raises(MissingExtraError, match=r"evr1-rewards\[math\]"):
        score("<answer>\\sqrt{2}/2</answer>", "0.5", "math")


def test_mode_is_validated() -> None:
    with pytest.raises(RewardConfigError):
        RewardRouter(mode="eval")  # type: ignore[arg-type]
    with pytest.raises(RewardConfigError):
        score("x", "A", "mcq", mode="strict")  # type: ignore[arg-type]


def test_async_judge_hook_for_open_ended() -> None:
    """`ascore` asks through the one judge interface (`evr1_rewards.judge`, evr1-eval's too): prompt in, verdict out."""
    import asyncio

    from evr1_rewards.judge import JUDGE_PROMPT_VERSION, judge_prompt

    prompts: list[str] = []

    async def judge(prompt: str) -> str:
        prompts.append(prompt)
        await asyncio.sleep(0)
        model_answer = prompt.split("Model answer: ")[1].split("\n")[0]
        return "Same shot. Judgement: 0 ... Judgement: 1" if "zoom" in model_answer.lower() else "Judgement: 0"

    router = RewardRouter(judge=judge)
    batch = [
        RewardInput(
            response="<answer>It is a Dolly Zoom shot</answer>",
            ground_truth="Dolly zoom",
            problem_type="video qa",
            extras={"question": "Which camera move?"},
        ),
        RewardInput(
            response="<answer>a pan</answer>",
            ground_truth='["Dolly zoom", "Vertigo effect"]',
            problem_type="open-ended",
        ),
        RewardInput(response="<answer>B</answer>", ground_truth="B", problem_type="mcq"),  # not a judge type
        RewardInput(response="", ground_truth="x", problem_type="open_ended"),  # empty answer: judge not called
    ]
    out = asyncio.run(router.ascore_batch(batch, concurrency=2))
    assert [r.accuracy for r in out] == [1.0, 0.0, 1.0, 0.0]  # the LAST verdict counts
    assert prompts == [judge_prompt("Which camera move?", ["Dolly zoom"], "It is a Dolly Zoom shot"),
                       judge_prompt("", ["Dolly zoom", "Vertigo effect"], "a pan")]  # fmt: skip
    assert "Reference answer: Dolly zoom | Vertigo effect" in prompts[1]
    assert JUDGE_PROMPT_VERSION == "judge-v1"  # results record it: a wording change must bump it
    assert out[0].details == {"judge": True}
    # The synchronous path never calls the judge: ROUGE-L instead.
    assert router.score(batch[0]).accuracy < 1.0


def test_a_judge_without_a_verdict_is_an_error_never_a_score() -> None:
    import asyncio

    from evr1_rewards import RewardError

    async def rambling(prompt: str) -> str:
        return "I cannot decide."

    async def down(prompt: str) -> str:
        raise ConnectionError("judge server down")

    inp = RewardInput(response="<answer>a pan</answer>", ground_truth="Dolly zoom", problem_type="open_ended")
    for judge, reason in ((rambling, "I cannot decide"), (down, "ConnectionError: judge server down")):
        with pytest.raises(RewardError, match=f"the judge gave no verdict .*{reason}"):
            asyncio.run(RewardRouter(judge=judge).ascore(inp))
