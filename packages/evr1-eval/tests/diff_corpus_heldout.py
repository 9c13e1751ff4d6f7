"""Generator B: held-out responses for the differential tests, written after the extractors were final.

Different phrasings and mutations from generator A (diff_corpus.py): case changes of whole answers, other wrappers
and markup, other languages, unclosed or upper-case reasoning tags, European decimals, fractions and percentages,
clock formats with hours, spans as keyword pairs on one line, yes / no variants, caption labels with punctuation.
The agreement the differential tests report is measured on this corpus (seed 1).
"""

from __future__ import annotations

import random

from diff_corpus import Context, Gen


def _letter(r: random.Random, c: Context) -> str:
    if r.random() < 0.55:
        return c.truth
    return r.choice(c.letters) if c.letters else c.truth


def _case(r: random.Random, text: str) -> str:
    return r.choice([text, text.upper(), text.lower(), text.title()])


def _txt(c: Context, letter: str) -> str:
    i = c.letters.find(letter)
    return c.options[i] if 0 <= i < len(c.options) else "it"


MC: list[Gen] = [
    lambda r, c: _case(r, f"The right choice would be {_letter(r, c)}"),
    lambda r, c: f"[{_letter(r, c)}]",
    lambda r, c: f"{{{_letter(r, c)}}}",
    lambda r, c: f"=> {_letter(r, c)}",
    lambda r, c: f"Final: {_letter(r, c)}",
    lambda r, c: f"ANSWER: {_letter(r, c)}",
    lambda r, c: f"La respuesta es {_letter(r, c)}",
    lambda r, c: f"La réponse est {_letter(r, c)}.",
    lambda r, c: f"答えは{_letter(r, c)}です",
    lambda r, c: f"정답은 {_letter(r, c)}",
    lambda r, c: f"答案为：{_letter(r, c)}",
    lambda r, c: f"\n\n{_letter(r, c)}\n",
    lambda r, c: f"\t{_letter(r, c)}!!",
    lambda r, c: f"{_letter(r, c)}?",
    lambda r, c: f"1. {_letter(r, c)}",
    lambda r, c: f"- {_letter(r, c)}",
    lambda r, c: (lambda x: f"{x} - {_txt(c, x)}")(_letter(r, c)),
    lambda r, c: (
        f"<think>Option {r.choice(c.letters)} looks plausible.</think><think>Re-checking.</think>{_letter(r, c)}"
    ),
    lambda r, c: f"<think>I will answer {_letter(r, c)}",
    lambda r, c: f"reasoning done</think>{_letter(r, c)}",
    lambda r, c: f"<analysis>{r.choice(c.letters)} first</analysis>\n{_letter(r, c)}",
    lambda r, c: f"<THINK>{r.choice(c.letters)}</THINK> {_letter(r, c)}",
    lambda r, c: f"\\text{{{_letter(r, c)}}}",
    lambda r, c: f"\\boxed{{\\text{{{_letter(r, c)}}}}}",
    lambda r, c: f"${_letter(r, c)}$",
    lambda r, c: f"<b>{_letter(r, c)}</b>",
    lambda r, c: f"<answer> {_letter(r, c)} </answer>",
    lambda r, c: f"Between {c.letters[0]} and {_letter(r, c)}, I'd go with {_letter(r, c)}.",
    lambda r, c: f"Neither {c.letters[0]} nor {c.letters[-1]}; it's {_letter(r, c)}",
    lambda r, c: f"Definitely ({_letter(r, c)}).",
    lambda r, c: f"{_letter(r, c)} is the best option among {', '.join(c.letters)}",
    lambda r, c: "the man is walking quickly down the long road and then he suddenly stops near the gate",
    lambda r, c: "Because everything happens at once, nothing can be concluded.",
    lambda r, c: f"*{_letter(r, c)}*",
    lambda r, c: f"`{_letter(r, c)}`",
    lambda r, c: f'"{_letter(r, c)}"',
    lambda r, c: f"'{_letter(r, c)}'",
    lambda r, c: (lambda x: f"{x}) {_txt(c, x)}")(_letter(r, c)),
    lambda r, c: _case(r, _txt(c, _letter(r, c))),
    lambda r, c: f"I'd pick {_letter(r, c).lower()}.",
    lambda r, c: f"My answer is {_letter(r, c)}",
    lambda r, c: f"My choice: ({_letter(r, c)})",
    lambda r, c: f"Options A and B are wrong, so {_letter(r, c)}.",
    lambda r, c: f"The video clearly shows a cat. {_letter(r, c)}",
    lambda r, c: f"{_letter(r, c)}，因为视频里有。",
    lambda r, c: "No option fits.",
    lambda r, c: "\n",
    lambda r, c: f"Answer - {_letter(r, c)}",
]

NUMBER: list[Gen] = [
    lambda r, c: f"≈{c.truth}",
    lambda r, c: f"{float(c.truth):.1e}",
    lambda r, c: f"{c.truth}".replace(".", ","),
    lambda r, c: f"{int(float(c.truth))} 1/2",
    lambda r, c: f"{c.truth}.",
    lambda r, c: f"+{c.truth}",
    lambda r, c: f"000{c.truth}",
    lambda r, c: f"{float(c.truth) - 0.0001:.4f}",
    lambda r, c: f"{float(c.truth) + 0.005:.3f}",
    lambda r, c: f"{float(c.truth) * 10:.0f}%",
    lambda r, c: f"approximately {float(c.truth) * 0.9:.1f} to {float(c.truth) * 1.1:.1f} m",
    lambda r, c: f"{int(float(c.truth))}-{int(float(c.truth)) + 1}",
    lambda r, c: f"{c.truth} or {float(c.truth) + 1:g}",
    lambda r, c: f"{float(c.truth) * 0.97:.2f} m (roughly)",
    lambda r, c: f"value: {c.truth}",
    lambda r, c: f"x = {c.truth}",
    lambda r, c: f"It's {c.truth}!",
    lambda r, c: f"{c.truth}\n{float(c.truth) + 2:g}",
    lambda r, c: f"{c.truth} square meters",
    lambda r, c: f"The distance is {c.truth} m. That is my estimate.",
    lambda r, c: f"<think>between {c.truth} and more</think>\n{c.truth} meters",
    lambda r, c: f"{float(c.truth) * r.choice([0.6, 0.7, 0.75, 0.85, 1.15, 1.25, 1.3, 1.35, 1.4]):.6g}",
    lambda r, c: "twenty",
    lambda r, c: "not visible",
    lambda r, c: f" {c.truth} ",
    lambda r, c: f"**{c.truth}**",
    lambda r, c: f"{c.truth}cm",
    lambda r, c: f"It equals {c.truth}.",
]

COUNT: list[Gen] = [
    lambda r, c: f"{c.truth} times",
    lambda r, c: f"Count: {c.truth}",
    lambda r, c: f"**{c.truth}**",
    lambda r, c: f"{c.truth}\n",
    lambda r, c: "They did it twice.",
    lambda r, c: f"{int(c.truth) * 10}",
    lambda r, c: f"Step 1 done, total {c.truth}",
    lambda r, c: "0",
    lambda r, c: f"<think>1, 2</think>{c.truth}",
    lambda r, c: f"approximately {c.truth}-{int(c.truth) + 1} times",
]


def _clock(seconds: float, hours: bool) -> str:
    s = int(seconds)
    return f"{s // 3600}:{(s % 3600) // 60:02d}:{s % 60:02d}" if hours else f"{s // 60:02d}:{s % 60:02d}"


SPAN: list[Gen] = [
    lambda r, c: f"{_clock(c.span[0], False)} to {_clock(c.span[1], False)}",
    lambda r, c: f"{c.span[0]:.1f}s–{c.span[1]:.1f}s",
    lambda r, c: f"[{c.span[0]:.1f}s, {c.span[1]:.1f}s]",
    lambda r, c: f"start={c.span[0]:.1f}, end={c.span[1]:.1f}",
    lambda r, c: f"from the {int(c.span[0])}th second to the {int(c.span[1])}th second",
    lambda r, c: f"{c.span[0]:.1f} to {c.span[1]:.0f}",
    lambda r, c: f"The action happens at {c.span[0]:.1f} seconds and finishes at {c.span[1]:.1f} seconds.",
    lambda r, c: f"{_clock(c.span[0], True)} - {_clock(c.span[1], True)}",
    lambda r, c: f"between {c.span[0]:.0f} and {c.span[1]:.0f} s",
    lambda r, c: f"around {(c.span[0] + c.span[1]) / 2:.0f}s",
    lambda r, c: f"{int(c.span[0])}-{int(c.span[1])}",
    lambda r, c: f'{{"start": {c.span[0]}, "end": {c.span[1]}}}',
    lambda r, c: f"<answer>{c.span[0]:.1f} - {c.span[1]:.1f}</answer>",
    lambda r, c: f"Start Time: {c.span[0]:.1f} End Time: {c.span[1]:.1f}",
    lambda r, c: f"The clip from {c.span[0] + 1:.1f} - {c.span[1] - 1:.1f}? Maybe {c.span[0]:.1f} - {c.span[1]:.1f}.",
    lambda r, c: f"It begins at {c.span[0]:.2f} and it ends at {c.span[1]:.2f}.",
    lambda r, c: "The event does not happen in this video.",
    lambda r, c: f"{c.span[1]:.1f} - {c.span[0]:.1f} seconds",
    lambda r, c: f"Happen: {c.span[0]:.1f}-{c.span[1]:.1f}",
    lambda r, c: f"at time {c.span[0]:.1f}",
]

YESNO: list[Gen] = [
    lambda r, c: f"{c.truth.upper()}!",
    lambda r, c: f"{c.truth.lower()}.",
    lambda r, c: f"{c.truth} it is",
    lambda r, c: "No." if c.truth == "Yes" else "Yes.",
    lambda r, c: "no, it isn't",
    lambda r, c: "Y.",
    lambda r, c: "N.",
    lambda r, c: "n",
    lambda r, c: "y",
    lambda r, c: "True",
    lambda r, c: "False",
    lambda r, c: "Absolutely yes",
    lambda r, c: "I'd say no",
    lambda r, c: "Yes/No",
    lambda r, c: "Nobody knows",
    lambda r, c: "Noted: yes",
    lambda r, c: f"<answer>{c.truth}</answer>\n",
    lambda r, c: f"\n{c.truth}",
    lambda r, c: "yes, but no",
    lambda r, c: "None",
]

CAPTION: list[Gen] = [
    lambda r, c: r.choice(c.labels) + ".",
    lambda r, c: r.choice(c.labels).lower(),
    lambda r, c: (lambda i: f"{c.labels[i]}: {c.sentences[i]}.")(r.randrange(len(c.labels))),
    lambda r, c: f"(B) {r.choice(c.sentences)}",
    lambda r, c: f"B) {r.choice(c.sentences)}",
    lambda r, c: r.choice(c.labels).split()[-1] + ")",
    lambda r, c: r.choice(c.sentences).lower(),
    lambda r, c: f"{r.choice(c.sentences)}.",
    lambda r, c: r.choice(["Option 1.", "Option 2.", "Caption A.", "Caption B.", "Sentence A.", "Sentence B."]),
    lambda r, c: r.choice(["1", "2", "A", "B", "A.", "B."]),
]

OPEN: list[Gen] = [
    lambda r, c: c.truth.upper(),
    lambda r, c: f"Answer: {c.truth}",
    lambda r, c: f"{c.truth}.",
    lambda r, c: f"I believe the answer is {c.truth.lower()}, as shown.",
    lambda r, c: " ".join(c.truth.split()[:1]),
    lambda r, c: f"Not {c.truth}",
    lambda r, c: f"<think>Hmm.</think>\n{c.truth.lower()}",
    lambda r, c: "n²",
    lambda r, c: "0.5",
    lambda r, c: "A completely unrelated answer with many words in it",
]

GENERATORS: dict[str, list[Gen]] = {
    "mc": MC,
    "number": NUMBER,
    "count": COUNT,
    "span": SPAN,
    "yesno": YESNO,
    "caption": CAPTION,
    "open": OPEN,
}
