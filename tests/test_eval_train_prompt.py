"""train -> eval: the evr1 protocol's default prompt is evr1-train's prompt, word for word.

evr1-eval may not import evr1-train (import contract), so `evr1_eval.protocol.Evr1Settings` keeps the trainer's
template and answer-format phrases itself; this test (run in the `train` session, where both are installed) fails the
moment either side changes without the other.
"""

from __future__ import annotations

import pytest

pytest.importorskip("evr1_train", reason="needs evr1-train: nox -s train")

from evr1_eval.protocol import TRAIN_ANSWER_FORMATS, Evr1Settings
from evr1_train.data.options import DataOptions
from evr1_train.data.prompt import answer_format, build_prompt_text

OPTIONS = ["A. a dog", "B. a cat", "C. a bird"]


@pytest.mark.parametrize("problem_type", [*TRAIN_ANSWER_FORMATS, "open_ended", "spatial-temporal grounding"])
def test_answer_formats_match(problem_type: str) -> None:
    assert Evr1Settings().answer_format(problem_type) == answer_format(problem_type)


@pytest.mark.parametrize("think", [True, False])
@pytest.mark.parametrize(("videos", "images"), [(1, 0), (1, 1), (0, 1), (0, 0)])
def test_rendered_prompt_matches_the_trainer(think: bool, videos: int, images: int) -> None:
    row = {
        "problem": "What is shown?",
        "options": OPTIONS,
        "problem_type": "multiple_choice",
        "videos": ["v.mp4"] * videos,
        "images": ["i.png"] * images,
    }
    trained = build_prompt_text(row, DataOptions(video_source="decode", think=think))
    placeholders = "<video>" * videos + "<image>" * images  # the backends place the media before the text
    ours = Evr1Settings(think=think).render("multiple_choice", "What is shown?", OPTIONS, n_videos=videos,
                                            n_images=images)  # fmt: skip
    assert trained == placeholders + ours
