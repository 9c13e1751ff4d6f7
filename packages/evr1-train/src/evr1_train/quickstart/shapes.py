"""Moving-shape scenes for the quickstart task: what is drawn, and the question/answer it supports.

Why this task: a randomly initialised tiny VLM can only be seen to *learn* within minutes on a CPU if the answer is a
short token sequence (an option letter, a digit, a span of whole seconds) that depends on something the vision tower
can pick up from a handful of 56x56 frames — a colour, a local motion, an amount of coloured area, the frames in
which a shape is present. Everything here is numpy only and deterministic given a seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (230, 40, 40),
    "green": (40, 210, 60),
    "blue": (50, 90, 240),
    "yellow": (235, 225, 40),
}
DIRECTIONS: dict[str, tuple[int, int]] = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
LETTERS = "ABCD"

#: question kinds -> (problem_type, modality). The mix used by the quickstart is `TASK_MIX`.
KINDS: dict[str, tuple[str, str]] = {
    "colour": ("multiple choice", "video"),
    "direction": ("multiple choice", "video"),
    "count": ("numerical", "video"),
    "when": ("temporal grounding", "video"),
    "image_colour": ("multiple choice", "image"),
    "flash": ("multiple choice", "video"),
}
#: shape side as a fraction of the frame side: large enough that colour dominates the patches it covers
SHAPE_FRACTION = 0.35
TASK_MIX: dict[str, float] = {"colour": 0.25, "direction": 0.2, "count": 0.2, "when": 0.15, "image_colour": 0.2}
#: The agent quickstart's task: a square flashes for FLASH_SECONDS somewhere inside FLASH_WINDOW of a FLASH_CLIP-second
#: clip; a two-frame overview (the clip's first and last frame) never shows it, a closer look at the window does.
AGENT_MIX: dict[str, float] = {"flash": 1.0}
MIXES: dict[str, dict[str, float]] = {"shapes": TASK_MIX, "agent": AGENT_MIX}
FLASH_CLIP = 4.0
FLASH_WINDOW = (1.0, 3.0)
FLASH_SECONDS = 0.75
#: The flash's side as a fraction of the frame's: most vision tokens of a tool frame carry its colour.
FLASH_FRACTION = 0.6


@dataclass(frozen=True)
class Shape:
    """One square; `start` is its top-left corner (pixels) at t=0, `velocity` is pixels per second."""

    colour: str
    start: tuple[float, float]
    velocity: tuple[float, float]
    size: int
    visible: tuple[float, float] = (0.0, float("inf"))  # seconds [from, to)


@dataclass(frozen=True)
class Scene:
    """A clip (or a still image when `duration == 0`) plus its question."""

    kind: str
    width: int
    height: int
    fps: float
    duration: float
    shapes: tuple[Shape, ...]
    question: str
    options: tuple[str, ...] = field(default=())
    answer: str = ""

    @property
    def problem_type(self) -> str:
        return KINDS[self.kind][0]

    @property
    def modality(self) -> str:
        return KINDS[self.kind][1]

    @property
    def n_frames(self) -> int:
        return max(1, round(self.duration * self.fps))

    def frame(self, t: float) -> np.ndarray:
        """The RGB uint8 frame `[H, W, 3]` at time `t` seconds."""
        import numpy as np

        img = np.full((self.height, self.width, 3), 16, np.uint8)
        for s in self.shapes:
            if not s.visible[0] <= t < s.visible[1]:
                continue
            x = round(s.start[0] + s.velocity[0] * t)
            y = round(s.start[1] + s.velocity[1] * t)
            x0, y0 = max(0, x), max(0, y)
            x1, y1 = min(self.width, x + s.size), min(self.height, y + s.size)
            if x1 > x0 and y1 > y0:
                img[y0:y1, x0:x1] = COLOURS[s.colour]
        return img

    def frames(self) -> np.ndarray:
        """All frames `[T, H, W, 3]` at `fps` (a still image gives T = 1)."""
        import numpy as np

        if self.duration == 0:
            return self.frame(0.0)[None]
        return np.stack([self.frame(i / self.fps) for i in range(self.n_frames)])


def _mc(options: list[str]) -> tuple[str, ...]:
    return tuple(f"{LETTERS[i]}. {o}" for i, o in enumerate(options))


def make_scene(kind: str, rng: random.Random, size: int = 112, fps: float = 8.0) -> Scene:
    """Draw one random scene of `kind` (see `KINDS`)."""
    if kind not in KINDS:
        raise KeyError(f"unknown quickstart question kind {kind!r}; known: {sorted(KINDS)}")
    sq = round(size * SHAPE_FRACTION)
    colours = list(COLOURS)
    dirs = list(DIRECTIONS)

    def moving(colour: str, duration: float, visible: tuple[float, float] = (0.0, float("inf"))) -> Shape:
        d = rng.choice(dirs)
        dx, dy = DIRECTIONS[d]
        speed = size * 0.55 / duration  # crosses a bit more than half the frame
        travel = speed * duration
        lo, hi = 0, size - sq
        # start so that the whole path stays inside the frame
        x = rng.uniform(lo + (travel if dx < 0 else 0), hi - (travel if dx > 0 else 0)) if dx else rng.uniform(lo, hi)
        y = rng.uniform(lo + (travel if dy < 0 else 0), hi - (travel if dy > 0 else 0)) if dy else rng.uniform(lo, hi)
        return Shape(colour, (x, y), (dx * speed, dy * speed), sq, visible)

    def scene(
        duration: float, shapes: tuple[Shape, ...], question: str, options: tuple[str, ...] = (), answer: str = ""
    ) -> Scene:
        return Scene(kind, size, size, fps, duration, shapes, question, options, answer)

    def colour_choice(c: str) -> tuple[tuple[str, ...], str]:
        """The colours as lettered options, and the letter of `c`."""
        return _mc(colours), LETTERS[colours.index(c)]

    if kind == "colour":
        c = rng.choice(colours)
        return scene(2.0, (moving(c, 2.0),), "What colour is the moving square?", *colour_choice(c))
    if kind == "direction":
        shape = moving(rng.choice(colours), 2.0)
        vx, vy = shape.velocity
        d = next(n for n, step in DIRECTIONS.items() if step == (int(vx > 0) - int(vx < 0), int(vy > 0) - int(vy < 0)))
        return scene(2.0, (shape,), "Which way does the square move?", _mc(dirs), LETTERS[dirs.index(d)])
    if kind == "count":
        k = rng.randint(1, 3)
        # static squares in distinct quadrants (the 2x2 grid of merged vision tokens): count = coloured quadrants
        cells = rng.sample(range(4), k)
        cell = size // 2
        side = min(sq, round(cell * 0.8))
        pad = (cell - side) / 2
        shapes = tuple(
            Shape(rng.choice(colours), ((c % 2) * cell + pad, (c // 2) * cell + pad), (0.0, 0.0), side) for c in cells
        )
        return scene(2.0, shapes, "How many squares are there?", (), str(k))
    if kind == "when":
        start = rng.choice([0, 1, 2])
        shape = moving(rng.choice(colours), 4.0, visible=(float(start), float(start + 2)))
        return scene(4.0, (shape,), "When is the square visible?", (), f"{start}-{start + 2}")
    if kind == "flash":
        c = rng.choice(colours)
        steps = int((FLASH_WINDOW[1] - FLASH_WINDOW[0] - FLASH_SECONDS) / 0.25)
        shown = FLASH_WINDOW[0] + 0.25 * rng.randint(0, steps)
        side = round(size * FLASH_FRACTION)
        x, y = rng.uniform(0, size - side), rng.uniform(0, size - side)
        flash = Shape(c, (x, y), (0.0, 0.0), side, visible=(shown, shown + FLASH_SECONDS))
        return scene(FLASH_CLIP, (flash,), "A square flashes briefly. What colour is it?", *colour_choice(c))
    # image_colour
    c = rng.choice(colours)
    x, y = rng.uniform(0, size - sq), rng.uniform(0, size - sq)
    return scene(0.0, (Shape(c, (x, y), (0.0, 0.0), sq),), "What colour is the square?", *colour_choice(c))


def sample_kinds(n: int, rng: random.Random, mix: dict[str, float] | None = None) -> list[str]:
    """`n` question kinds in proportion to `mix` (exact counts, shuffled), so small splits still cover every kind."""
    weights = mix or TASK_MIX
    unknown = set(weights) - set(KINDS)
    if unknown:
        raise KeyError(f"unknown quickstart question kind(s) {sorted(unknown)}; known: {sorted(KINDS)}")
    total = sum(weights.values())
    counts = {k: int(n * w / total) for k, w in weights.items()}
    for k in sorted(weights, key=lambda k: -weights[k])[: n - sum(counts.values())]:
        counts[k] += 1
    kinds = [k for k, c in counts.items() for _ in range(c)]
    rng.shuffle(kinds)
    return kinds
