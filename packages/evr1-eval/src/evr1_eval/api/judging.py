"""LLM-judged rows: the answer part of a response put to evr1-rewards' judge (`evr1_rewards.judge`), read strictly.

The judge's identity, version and temperature belong to the run settings (the runner records them); the prompt and
the verdict reader are evr1-rewards' one judge interface (training's `RewardRouter.ascore` uses the same). This
module picks the answer out of a response and turns the verdict into an `Outcome`: a judge that fails leaves the row
pending instead of inventing a score.
"""

from __future__ import annotations

import re

from evr1_eval.api.extractors import STRIP_SCAN, capped, strip_reasoning
from evr1_eval.types import Judge, Outcome, Sample
from evr1_rewards import Response
from evr1_rewards.judge import JUDGE_PROMPT_VERSION, ask_judge

_FINAL = re.compile(r"therefore,?\s+the\s+final\s+answer\s+is\s*:?", re.IGNORECASE)


def final_text(response: str) -> str:
    """The answer part of a response: the final `<answer>` tag's content as evr1-rewards reads it (the one definition,
    `evr1_rewards.Response.answer_tag`), else the text after the reasoning blocks."""
    text = capped(response, limit=STRIP_SCAN)  # a judge reads the answer, not 1M characters; stripping stays cheap
    answer = Response(text).answer_tag
    return answer if answer is not None else strip_reasoning(text)


async def judge_outcome(sample: Sample, response: str, judge: Judge) -> Outcome:
    answer = _FINAL.split(final_text(response))[-1].strip()
    question = sample.extras.get("question", "") or sample.prompt
    verdict = await ask_judge(judge, str(question), str(sample.ground_truth), answer)
    if verdict.error is not None:
        return Outcome(score=0.0, extracted=None, details={"judge_error": verdict.error}, needs_judge=True)
    if verdict.value is None:
        return Outcome(
            score=0.0,
            extracted=None,
            details={"judge_unparsable": verdict.text[-300:], "judge_prompt_version": JUDGE_PROMPT_VERSION},
            needs_judge=True,
        )
    return Outcome(
        score=float(verdict.value),
        extracted=final_text(response)[:500],
        details={"scorer": "llm-judge", "judge_prompt_version": JUDGE_PROMPT_VERSION, "verdict": verdict.value},
    )
