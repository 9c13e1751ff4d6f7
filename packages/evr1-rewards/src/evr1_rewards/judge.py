"""The LLM-judge interface: one judge prompt, one strict verdict reader, one call that never invents a score.

A judge is any async callable from the judge prompt to the judge's raw text (`Judge`), e.g. a request to an
OpenAI-compatible server. evr1-eval's LLM-judged benchmarks and `RewardRouter.ascore` both ask through `ask_judge`,
so a verdict means the same thing in training and evaluation. The verdict is the LAST "Judgement: 0/1" of the text:
a judge that fails or gives none yields a `Verdict` without a value (the caller decides: a pending row, an error),
never a guessed score. The prompt's wording is versioned (`JUDGE_PROMPT_VERSION`) because results record it.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

__all__ = ["JUDGE_PROMPT_VERSION", "Judge", "Verdict", "ask_judge", "judge_prompt", "parse_verdict"]

#: The judge prompt -> the judge's raw text.
Judge = Callable[[str], Awaitable[str]]
JUDGE_PROMPT_VERSION = "judge-v1"
_VERDICT = re.compile(r"judgement\s*:\s*([01])", re.IGNORECASE)
#: Longest model answer put in a judge prompt (a runaway answer must not flood the judge).
MAX_ANSWER_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the judge said: `value` 1 (consistent) / 0, or None with `error` (the call failed) or `text` holding the
    unreadable reply."""

    value: int | None
    text: str = ""
    error: str | None = None


def judge_prompt(question: str, reference: str | Sequence[str], answer: str) -> str:
    """Question, reference(s) and the model's answer; the judge ends with 'Judgement: 1' or 'Judgement: 0'."""
    refs = reference if isinstance(reference, str) else " | ".join(reference)
    return (
        "You are grading an answer to a question about a video.\n"
        f"Question: {question}\n"
        f"Reference answer: {refs}\n"
        f"Model answer: {answer[:MAX_ANSWER_CHARS]}\n"
        "Is the model answer semantically consistent with the reference answer (same technique, concept or fact, "
        "explicitly and unambiguously equivalent)? Give one sentence of reasoning, then end with exactly "
        "'Judgement: 1' (consistent) or 'Judgement: 0' (not consistent)."
    )


def parse_verdict(text: str | None) -> int | None:
    """The LAST 'Judgement: 0/1' in the judge output; None when there is none."""
    found = _VERDICT.findall(text or "")
    return int(found[-1]) if found else None


async def ask_judge(judge: Judge, question: str, reference: str | Sequence[str], answer: str) -> Verdict:
    """Ask `judge` once; a failing judge (any exception: network, server) becomes a `Verdict` with `error`."""
    try:
        text = await judge(judge_prompt(question, reference, answer))
    except Exception as exc:  # the judge is a remote service: its failure must not kill a run nor invent a score
        return Verdict(None, error=f"{type(exc).__name__}: {exc}"[:300])
    return Verdict(parse_verdict(text), text or "")
