"""Realistic model responses for the differential tests, generated per sample from its ground truth.

Two independent generators:
- `tuned` (generator A, seed 0): the families the extractors were developed against — bare and lower-case letters,
  "(B)", "B. text", "The answer is B", think / answer tags, option text only, several letters, refusals, empty
  strings, `\\boxed{}`, Chinese, numbers with units and separators, spans in prose, JSON, hh:mm:ss and reversed spans,
  yes / no variants.
- `heldout` (generator B, seed 1, `diff_corpus_heldout.py`): written after the extractors were final, with other
  phrasings and mutations; the agreement reported per benchmark is measured on it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Context:
    """What a response generator may use: the kind of answer asked for and its ground truth."""

    kind: str  # mc | number | count | span | yesno | caption | open
    truth: str = ""
    letters: str = "ABCD"
    options: tuple[str, ...] = ()  # option texts, in letter order
    span: tuple[float, float] = (0.0, 0.0)
    labels: tuple[str, ...] = ()  # caption matching: the option lines' labels ("Option 1", "Caption A")
    sentences: tuple[str, ...] = ()  # caption matching: the option sentences


Gen = Callable[[random.Random, Context], str]

_THINK = (
    "Let me look at each option. {a} seems unlikely because the motion does not match. {b} fits what happens.",
    "The video shows a person walking. Option {a} mentions running, so it is wrong; {b} is consistent.",
    "First, I check the start of the clip. Then the end. Comparing {a} and {b}, the latter is correct.",
)


def _other(rng: random.Random, letters: str, truth: str) -> str:
    others = [c for c in letters if c != truth]
    return rng.choice(others) if others else truth


def _pick(rng: random.Random, ctx: Context) -> str:
    """Mostly the right letter, sometimes a wrong one: a corpus of only right answers would hide half the bugs."""
    return ctx.truth if rng.random() < 0.6 else _other(rng, ctx.letters, ctx.truth)


def _text(ctx: Context, letter: str) -> str:
    i = ctx.letters.find(letter)
    return ctx.options[i] if 0 <= i < len(ctx.options) else "none of them"


MC: list[Gen] = [
    lambda r, c: _pick(r, c),
    lambda r, c: _pick(r, c).lower(),
    lambda r, c: f"({_pick(r, c)})",
    lambda r, c: (lambda x: f"{x}. {_text(c, x)}")(_pick(r, c)),
    lambda r, c: (lambda x: f"{x}: {_text(c, x)}")(_pick(r, c)),
    lambda r, c: f"The answer is {_pick(r, c)}",
    lambda r, c: f"The answer is {_pick(r, c)}.",
    lambda r, c: f"The correct answer is ({_pick(r, c)}) {_text(c, c.truth)}",
    lambda r, c: f"Answer: {_pick(r, c)}",
    lambda r, c: f"Best option: ({_pick(r, c)})",
    lambda r, c: f"{_pick(r, c)})",
    lambda r, c: f"Option {_pick(r, c)}",
    lambda r, c: f"**{_pick(r, c)}**",
    lambda r, c: f"\\boxed{{{_pick(r, c)}}}",
    lambda r, c: f"$\\boxed{{{_pick(r, c)}}}$",
    lambda r, c: (
        lambda x: f"<think>{r.choice(_THINK).format(a=_other(r, c.letters, x), b=x)}</think>\n<answer>{x}</answer>"
    )(_pick(r, c)),
    lambda r, c: (lambda x: f"<think>{r.choice(_THINK).format(a=_other(r, c.letters, x), b=x)}</think>\n\n{x}")(
        _pick(r, c)
    ),
    lambda r, c: f"<answer>{_pick(r, c)}</answer>",
    lambda r, c: f"<answer>{_pick(r, c)}. {_text(c, c.truth)}</answer>",
    lambda r, c: _text(c, _pick(r, c)),
    lambda r, c: f"It is {_text(c, _pick(r, c)).lower()}.",
    lambda r, c: f"{_other(r, c.letters, c.truth)} or {c.truth}",
    lambda r, c: f"{c.truth} and {_other(r, c.letters, c.truth)}",
    lambda r, c: f"I think it's {_pick(r, c)}, not {_other(r, c.letters, c.truth)}.",
    lambda r, c: "I cannot determine the answer from the video.",
    lambda r, c: "Sorry, I can't help with that.",
    lambda r, c: "",
    lambda r, c: "   ",
    lambda r, c: f"答案是{_pick(r, c)}",
    lambda r, c: f"选项{_pick(r, c)}",
    lambda r, c: f"我选{_pick(r, c)}。",
    lambda r, c: f'{{"answer": "{_pick(r, c)}"}}',
    lambda r, c: (
        f"Based on the video, the person first opens the door. Considering all options, {_other(r, c.letters, c.truth)} "
        f"is ruled out. Therefore, the final answer is: {_pick(r, c)}"
    ),
    lambda r, c: f"{_pick(r, c)}\n\nExplanation: the clip shows it clearly.",
    lambda r, c: f"After watching the video carefully, I believe the answer is {_pick(r, c)}.",
    lambda r, c: "It is a dog running across the yard.",
    lambda r, c: f"The best answer is {_pick(r, c)}",
    lambda r, c: f"The best option is {_pick(r, c)}",
    lambda r, c: f"Correct option: {_pick(r, c)}",
    lambda r, c: f"{r.choice(['E', 'F', 'G'])}",
    lambda r, c: "A",
    lambda r, c: f"the answer is {_pick(r, c).lower()}",
    lambda r, c: f"Answer: {_pick(r, c).lower()}",
    lambda r, c: f"answer is ({_pick(r, c)})",
    lambda r, c: f"option: {_pick(r, c)}",
    lambda r, c: f"I choose {_pick(r, c)}",
    lambda r, c: f"{_pick(r, c)} is correct.",
    lambda r, c: f"The answer is {_pick(r, c)}, not {_other(r, c.letters, c.truth)}.",
    lambda r, c: f"{'.' * 33} x.{_pick(r, c).lower()}",
    lambda r, c: f"Answer:{_pick(r, c)}",
    lambda r, c: f"{_pick(r, c)}.",
    lambda r, c: f"{_pick(r, c)} {_text(c, c.truth)}",
    lambda r, c: f"Option ({_pick(r, c)}) is right; option ({_other(r, c.letters, c.truth)}) is not.",
    lambda r, c: f"Answer: {_pick(r, c)}. {_text(c, c.truth)}",
    lambda r, c: "I",
]

NUMBER: list[Gen] = [
    lambda r, c: c.truth,
    lambda r, c: f"{float(c.truth):.1f}",
    lambda r, c: f"{float(c.truth) * r.choice([0.5, 0.9, 1.1, 1.5, 2.0]):.3f}",
    lambda r, c: f"{c.truth} meters",
    lambda r, c: f"{c.truth} m",
    lambda r, c: f"{c.truth}m²",
    lambda r, c: f"About {c.truth} meters.",
    lambda r, c: f"The answer is {c.truth}.",
    lambda r, c: f"{c.truth}.",
    lambda r, c: f"{float(c.truth):,.2f}",
    lambda r, c: f"{float(c.truth) * 1000:,.0f}",
    lambda r, c: f"{float(c.truth):.2e}",
    lambda r, c: f"{float(c.truth):.3f}",
    lambda r, c: f"{float(c.truth) - 0.1:.2f}-{float(c.truth) + 0.1:.2f}",
    lambda r, c: f"{c.truth} ± 0.01",
    lambda r, c: f"-{c.truth}",
    lambda r, c: "three",
    lambda r, c: "N/A",
    lambda r, c: "",
    lambda r, c: f"<answer>{c.truth}</answer>",
    lambda r, c: f"<think>Roughly {c.truth} or so.</think>{c.truth}",
    lambda r, c: f"roughly 2 to {c.truth}",
    lambda r, c: "三",
    lambda r, c: f"{c.truth} tables",
    lambda r, c: f"There are {c.truth} of them.",
    lambda r, c: f"The value is {c.truth}",
    lambda r, c: f"{c.truth}\n",
    lambda r, c: "0",
    lambda r, c: "inf",
    lambda r, c: repr(float(c.truth) * r.choice([0.5, 0.55, 0.9, 0.95, 1.05, 1.1, 1.45, 1.5])),
    lambda r, c: f"{float(c.truth) * 0.9:g}",
    lambda r, c: f"{float(c.truth) * 1.1:g}",
    lambda r, c: f"{round(float(c.truth) * 0.8, 1)}",
    lambda r, c: f"{float(c.truth):.4f}",
    lambda r, c: f"{float(c.truth) + 0.004:.3f}",
    lambda r, c: f"The answer is {float(c.truth) + 0.004:.3f} meters. So it is about that.",
    lambda r, c: f"{float(c.truth):.2f} (±0.05)",
    lambda r, c: f"Final answer: {c.truth}",
]

COUNT: list[Gen] = [
    lambda r, c: c.truth,
    lambda r, c: f"{int(c.truth) + r.choice([-1, 1, 2])}",
    lambda r, c: f"They did it {c.truth} times.",
    lambda r, c: f"{c.truth} or {int(c.truth) + 1}",
    lambda r, c: f"<answer>{c.truth}</answer>",
    lambda r, c: "three",
    lambda r, c: "",
    lambda r, c: f"{c.truth}.",
    lambda r, c: "I count 1, 2, 3.",
    lambda r, c: f"The total count is {c.truth}",
]


def _fmt_clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600:02d}:{(s % 3600) // 60:02d}:{s % 60:02d}"


SPAN: list[Gen] = [
    lambda r, c: f"{c.span[0]:.1f} - {c.span[1]:.1f}",
    lambda r, c: f"The event happens in the {c.span[0]:.1f} - {c.span[1]:.1f} seconds.",
    lambda r, c: f"Start time: {c.span[0]:.1f}\nEnd time: {c.span[1]:.1f}",
    lambda r, c: f"It starts at {_fmt_clock(c.span[0])} and ends at {_fmt_clock(c.span[1])}.",
    lambda r, c: f"{_fmt_clock(c.span[0])}-{_fmt_clock(c.span[1])}",
    lambda r, c: f"{int(c.span[0]) // 60}:{int(c.span[0]) % 60:02d} - {int(c.span[1]) // 60}:{int(c.span[1]) % 60:02d}",
    lambda r, c: f'{{"time": [{c.span[0]}, {c.span[1]}]}}',
    lambda r, c: f"[{c.span[0]}, {c.span[1]}]",
    lambda r, c: f"from {c.span[1]:.0f} to {c.span[0]:.0f} seconds",
    lambda r, c: f"The event happens in the {c.span[1]:.1f} - {c.span[0]:.1f} seconds.",
    lambda r, c: f"between {c.span[0]:.0f} and {c.span[1]:.0f} seconds",
    lambda r, c: f"at {c.span[0]:.0f}s",
    lambda r, c: f"{c.span[0]:.1f}s - {c.span[1]:.1f}s",
    lambda r, c: f"<think>maybe 1 - 2</think>{c.span[0]:.1f} - {c.span[1]:.1f}",
    lambda r, c: f"<answer>{c.span[0]:.1f} to {c.span[1]:.1f}</answer>",
    lambda r, c: "no idea",
    lambda r, c: "",
    lambda r, c: f"The event starts at {c.span[0]:.1f} seconds.",
    lambda r, c: f"{c.span[0] + r.uniform(-3, 3):.2f} - {c.span[1] + r.uniform(-3, 3):.2f}",
    lambda r, c: f"The person does it from {c.span[0]:.1f} to {c.span[1]:.1f}! Then stops.",
    lambda r, c: (
        f"It happens at {c.span[0]:.1f} - {c.span[1]:.1f} and again at {c.span[1] + 2:.1f} - {c.span[1] + 5:.1f}."
    ),
    lambda r, c: f"The event starts at {c.span[0]:.1f}\nThe event ends at {c.span[1]:.1f}",
    lambda r, c: f"Start: {_fmt_clock(c.span[0])}\nEnd: {_fmt_clock(c.span[1])}",
    lambda r, c: f"{c.span[0]:.0f}s to {c.span[1]:.0f}s",
    lambda r, c: f"The moment lasts {c.span[1] - c.span[0]:.1f} seconds, starting at {c.span[0]:.1f}.",
    lambda r, c: f"{c.span[0]:.1f} – {c.span[1]:.1f}",
]

YESNO: list[Gen] = [
    lambda r, c: c.truth,
    lambda r, c: c.truth.lower(),
    lambda r, c: c.truth.upper(),
    lambda r, c: "Yes" if c.truth == "No" else "No",
    lambda r, c: f"{c.truth}.",
    lambda r, c: f"{c.truth}, it is.",
    lambda r, c: f"The answer is {c.truth.lower()}",
    lambda r, c: c.truth[0],
    lambda r, c: c.truth[0] + " ",
    lambda r, c: f" {c.truth}",
    lambda r, c: "Not sure",
    lambda r, c: "I KNOW",
    lambda r, c: f"<answer>{c.truth}</answer>",
    lambda r, c: "Nope",
    lambda r, c: "Definitely not.",
    lambda r, c: "yeah",
    lambda r, c: "不是",
    lambda r, c: "",
    lambda r, c: f"<think>hmm</think>{c.truth}",
    lambda r, c: "No, not yet.",
]

CAPTION: list[Gen] = [
    lambda r, c: r.choice(c.labels),
    lambda r, c: (lambda i: f"{c.labels[i]}: {c.sentences[i]}")(r.randrange(len(c.labels))),
    lambda r, c: r.choice(c.sentences),
    lambda r, c: r.choice(c.labels).split()[-1],
    lambda r, c: r.choice(c.labels).split()[-1] + ".",
    lambda r, c: f"(A) {r.choice(c.sentences)}",
    lambda r, c: f"I think {r.choice(c.labels)}",
    lambda r, c: f"The answer is {r.choice(c.labels)}.",
    lambda r, c: "",
    lambda r, c: r.choice(["Option 1", "Option 2", "Caption A", "Caption B", "Sentence A", "Sentence B"]),
]

OPEN: list[Gen] = [
    lambda r, c: c.truth,
    lambda r, c: c.truth.lower(),
    lambda r, c: f"The answer is {c.truth}.",
    lambda r, c: f"It is {c.truth.split()[0] if c.truth.split() else 'x'}",
    lambda r, c: "I am not sure.",
    lambda r, c: "",
    lambda r, c: f"<think>Let me think.</think>{c.truth}",
    lambda r, c: "Something else entirely.",
    lambda r, c: f"{c.truth} is shown in the video",
    lambda r, c: "O(n^2)",
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


def responses(ctx: Context, seed: int, per_sample: int, families: dict[str, list[Gen]] = GENERATORS) -> list[str]:
    """`per_sample` responses for one sample: every family of its kind once (in a seeded order), then random ones."""
    rng = random.Random(f"{seed}|{ctx.kind}|{ctx.truth}|{ctx.letters}|{ctx.options[:1]}")
    gens: Sequence[Gen] = families[ctx.kind]
    order = list(range(len(gens)))
    rng.shuffle(order)
    picks = (order * ((per_sample // len(order)) + 1))[:per_sample]
    return [gens[i](rng, ctx) for i in picks]
