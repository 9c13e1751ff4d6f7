"""MMVU val (arXiv 2501.12380): 625 MC + 375 open-ended expert-domain questions.

Official protocol (reference: lmms-eval 0.7.3 `tasks/mmvu/utils.py`): the task's prompts ("\\nQuestion:<q>\\nA: …\\nE: …
\\nVisual Information: processed video\\nDo not generate any intermediate reasoning process. Answer directly with the
option letter from the\\ngiven choices.\\n" and its open-ended counterpart); `evaluate_with_rule_based` on the response
after reasoning-tag stripping — lenient on purpose: an MC answer is right when its first standalone A-E, any
standalone GT letter, or the GT option's text occurs ("This is a blue car" is right for A); an open answer when it
equals, contains or is contained in the answer, shares its first number within 0.01, or has every (>2-letter) word of
a 2-5 word answer. MC rows are rule-only; an open answer the rules reject goes to the LLM judge (GPT-4o in the
reference): without a judge it stays pending here (the reference counts it wrong when its judge is unreachable —
`accuracy_judge_failed_as_wrong`). Accuracy covers the rows whose subject (the video's folder) is in the reference's
discipline map, per discipline (Science, Engineering, Healthcare, Humanities_and_Social_Science). MMVU's own protocol
(yale-nlp/MMVU) judges both formats with GPT-4o.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from typing import Any

from evr1_eval.api.aggregation import Result, by_group, pct
from evr1_eval.api.base import Benchmark
from evr1_eval.api.extractors import capped
from evr1_eval.api.loading import RowView, parent_folder
from evr1_eval.api.references import lmms_eval
from evr1_eval.api.registry import register
from evr1_eval.api.scoring_rules import doc_of
from evr1_eval.types import Outcome, Sample, ScoredSample

DISCIPLINES = {
    **dict.fromkeys(
        ("Biology", "Chemistry", "Modern_Physics", "Astronomy", "Geography", "Materials_Science", "Neurobiology",
         "Electromagnetism", "Thermodynamics", "Mechanics"), "Science"),
    **dict.fromkeys(
        ("Civil_Engineering", "Electrical_Engineering", "Mechanical_Engineering", "Biomedical_Engineering",
         "Electronics_and_Communication", "Computer_Science"), "Engineering"),
    **dict.fromkeys(("Clinical_Medicine", "Basic_Medicine", "Preventive_Medicine", "Pharmacy", "Dentistry"), "Healthcare"),
    **dict.fromkeys(("Art", "Literature", "History", "Law", "Economics", "Management"), "Humanities_and_Social_Science"),
}  # fmt: skip
_MC_PROMPT = (
    "\nQuestion:{question}\nA: {a}\nB: {b}\nC: {c}\nD: {d}\nE: {e}\nVisual Information: processed video\n"
    "Do not generate any intermediate reasoning process. Answer directly with the option letter from the\n"
    "given choices.\n"
)
_OPEN_PROMPT = (
    "\nQuestion:{question}\nVisual Information: processed video\n"
    "Do not generate any intermediate reasoning process. Directly output the final answer.\n"
)
_SUPERSCRIPTS = str.maketrans({sup: f"^{digit}" for sup, digit in zip("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789", strict=True)})
_FIRST_LETTER = re.compile(r"\b([A-E])\b", re.IGNORECASE)
_NUMBER = re.compile(r"\d+\.?\d*")
_BIG_O = re.compile(r"O\s*\([^)]+\)", re.IGNORECASE)


def official_doc(view: RowView) -> dict[str, Any]:
    mc = view.problem_type == "multiple_choice"
    return {
        "question": view.question,
        "question_type": "multiple-choice" if mc else "open_ended",
        "choices": dict(view.options) if mc else {},
        "answer": view.truth,
        "category": parent_folder(view.row) or "",
    }


def official_prompt(doc: Mapping[str, Any]) -> str:
    if doc["question_type"] != "multiple-choice":
        return _OPEN_PROMPT.format(question=doc["question"])
    c = doc["choices"]
    return _MC_PROMPT.format(question=doc["question"], **{k.lower(): c.get(k, "") for k in "ABCDE"})


def _math(text: str) -> str:
    return text.translate(_SUPERSCRIPTS)


def _words(text: str) -> list[str]:
    return [w.strip(string.punctuation) for w in text.split() if w.strip(string.punctuation)]


def mc_rule(doc: Mapping[str, Any], prediction: str) -> bool:
    pred, answer = prediction.strip(), str(doc["answer"]).strip()
    m = _FIRST_LETTER.search(pred)
    if m and m.group(1).upper() == answer.upper():
        return True
    if answer.upper() in pred.upper() and re.search(rf"\b{re.escape(answer)}\b", pred, re.IGNORECASE):
        return True
    if answer in doc.get("choices", {}):
        choice = doc["choices"][answer].strip().lower()
        low = pred.lower()
        if choice in low:
            return True
        if answer.upper() in pred.upper():
            words = [w for w in (w.strip(string.punctuation) for w in choice.split()) if len(w) > 2]
            if words and any(w in low for w in words):
                return True
    return False


def open_rule(doc: Mapping[str, Any], prediction: str) -> bool:
    pred_n, answer_n = _math(prediction.strip().lower()), _math(str(doc["answer"]).strip().lower())
    pred, answer = " ".join(pred_n.split()), " ".join(answer_n.split())
    if pred == answer or answer in pred or pred in answer:
        return True
    pred_numbers, answer_numbers = _NUMBER.findall(pred_n), _NUMBER.findall(answer_n)
    if pred_numbers and answer_numbers and abs(float(answer_numbers[0]) - float(pred_numbers[0])) < 0.01:
        return True
    answer_words, pred_words = _words(answer), _words(pred)
    if 2 <= len(answer_words) <= 5 and all(w in pred_words for w in answer_words if len(w) > 2):
        return True
    po, ao = _BIG_O.search(pred), _BIG_O.search(answer)
    return bool(po and ao and _math(po.group(0).lower()) == _math(ao.group(0).lower()))


def rule(sample: Sample, response: str) -> Outcome:
    doc = doc_of(sample)
    text = capped(response)
    if doc["question_type"] == "multiple-choice":
        m = re.search(r"\b([A-E])\b", text)
        return Outcome(
            score=float(mc_rule(doc, text)), extracted=m.group(1) if m else "N/A", details={"scorer": "mmvu-rule"}
        )
    if open_rule(doc, text):
        return Outcome(score=1.0, extracted=text[:200], details={"scorer": "mmvu-rule"})
    return Outcome(score=0.0, extracted=text[:200], details={"scorer": "mmvu-rule", "rule": 0}, needs_judge=True)


def aggregate(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
    mapped = [r for r in rows if r.groups.get("subject") in DISCIPLINES]
    metrics = {"accuracy": pct(r.score for r in mapped)}
    per: dict[str, list[float]] = {}
    for subject, members in by_group(mapped, "subject").items():
        per.setdefault(DISCIPLINES[subject], []).extend(r.score for r in members)
    metrics.update({f"discipline/{d}": pct(v) for d, v in sorted(per.items())})
    outside = len(rows) - len(mapped)
    notes = [f"{outside} rows have a subject outside the reference's discipline map and are outside accuracy"]
    return "accuracy", metrics, notes if outside else []


BENCHMARK = register(
    Benchmark(
        name="mmvu",
        title="MMVU (val)",
        problem_types=("multiple_choice", "open_ended"),
        group_fields={"subject": ("subject", "discipline")},
        derived_groups={"subject": parent_folder},
        reference=lmms_eval("mmvu"),
        official_doc=official_doc,
        official_prompt=official_prompt,
        scorer=rule,
        reasoning_blocks="strip",
        aggregator=aggregate,
        judge_fallback_types=frozenset({"open_ended"}),
        aliases=("mmvu-mc", "mmvu-all"),
    )
)
