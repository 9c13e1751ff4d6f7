"""LLM-judged rows: a binary-consistency prompt sent to an async judge (the openai backend), parsed strictly.

The judge's identity, version and temperature belong to the run settings (the runner records them); this module only
builds the prompt and reads the verdict. A judge that fails leaves the row pending instead of inventing a score.
"""

from __future__ import annotations

import re

from evr1_eval.api.extractors import capped, last_answer_tag, strip_reasoning
from evr1_eval.types import Judge, Outcome, Sample

JUDGE_PROMPT_VERSION = "judge-v1"
_VERDICT = re.compile(r"judgement\s*:\s*([01])", re.IGNORECASE)
_FINAL = re.compile(r"therefore,?\s+the\s+final\s+answer\s+is\s*:?", re.IGNORECASE)


def final_text(response: str) -> str:
    """The answer part of a response: the last non-empty `<answer>`, else the text after the reasoning blocks."""
    text = capped(response)
    answer = last_answer_tag(text)
    return answer.strip() if answer is not None else strip_reasoning(text)


def judge_prompt(sample: Sample, response: str) -> str:
    """Question, reference and the model's final answer; the judge ends with 'Judgement: 1' or 'Judgement: 0'."""
    answer = final_text(response)
    parts = _FINAL.split(answer)
    answer = parts[-1].strip()[:4000]
    return (
        "You are grading an answer to a question about a video.\n"
        f"Question: {sample.extras.get('question', '') or sample.prompt}\n"
        f"Reference answer: {sample.ground_truth}\n"
        f"Model answer: {answer}\n"
        "Is the model answer semantically consistent with the reference answer (same technique, concept or fact, "
        "explicitly and unambiguously equivalent)? Give one sentence of reasoning, then end with exactly "
        "'Judgement: 1' (consistent) or 'Judgement: 0' (not consistent)."
    )


def parse_verdict(text: str) -> int | None:
    """The LAST 'Judgement: 0/1' in the judge output; None when there is none."""
    found = _VERDICT.findall(text or "")
    return int(found[-1]) if found else None


async def judge_outcome(sample: Sample, response: str, judge: Judge) -> Outcome:
    prompt = judge_prompt(sample, response)
    try:
        verdict_text = await judge(prompt)
    except Exception as exc:  # a judge failure must not kill the run nor invent a score
        return Outcome(
            score=0.0, extracted=None, details={"judge_error": f"{type(exc).__name__}: {exc}"[:300]}, needs_judge=True
        )
    verdict = parse_verdict(verdict_text)
    if verdict is None:
        return Outcome(
            score=0.0,
            extracted=None,
            details={"judge_unparsable": (verdict_text or "")[-300:], "judge_prompt_version": JUDGE_PROMPT_VERSION},
            needs_judge=True,
        )
    return Outcome(
        score=float(verdict),
        extracted=final_text(response)[:500],
        details={"scorer": "llm-judge", "judge_prompt_version": JUDGE_PROMPT_VERSION, "verdict": verdict},
    )
