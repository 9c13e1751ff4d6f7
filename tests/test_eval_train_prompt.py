"""train -> eval: both engines render the one evr1 prompt format (`evr1_rewards.prompt_format`) byte for byte.

Neither keeps a copy of the wording; these tests (run in the `train` session, where both are installed) check that
the two renderers around it agree for every registered problem type and every row shape the trainer takes.
"""

from __future__ import annotations

import pytest

pytest.importorskip("evr1_train", reason="needs evr1-train: nox -s train")

from evr1_cache import TrainSettings
from evr1_eval.protocol import Evr1Settings
from evr1_eval.train_protocol import settings_from_protocol
from evr1_rewards import available_types, describe_types
from evr1_train.data.options import DataOptions
from evr1_train.data.prompt import build_prompt_text, describe_prompts

OPTIONS = ["A. a dog", "B. a cat", "C. a bird"]
#: Every canonical type and every alias of it: the spellings datasets use.
SPELLINGS = [*available_types(), *(alias for info in describe_types() for alias in info.aliases)]


@pytest.mark.parametrize("think", [True, False])
@pytest.mark.parametrize("problem_type", SPELLINGS)
def test_every_problem_type_renders_identically(problem_type: str, think: bool) -> None:
    row = {"problem": "What is shown?", "options": OPTIONS, "problem_type": problem_type, "videos": ["v.mp4"]}
    trained = build_prompt_text(row, DataOptions(video_source="decode", think=think))
    ours = Evr1Settings(think=think).render(problem_type, "What is shown?", OPTIONS)
    assert trained == "<video>" + ours
    # a checkpoint's recorded prompt (its train -> eval record) renders the same text again
    recorded = TrainSettings.from_json(
        {"format": "evr1-train-protocol", "version": 1, "prompt": describe_prompts(DataOptions(video_source="decode",
         think=think)), "generation": {"eos_token_ids": [], "max_new_tokens": 8}, "sampling": {"video": {}, "image": {}}},
        "run",
    )  # fmt: skip
    assert settings_from_protocol(recorded, "run").render(problem_type, "What is shown?", OPTIONS) == ours


def test_the_types_differ() -> None:
    """The parametrisation above cannot pass with one phrase for every type: the formats it compares are distinct."""
    rendered = {Evr1Settings().render(t, "q", []) for t in ("multiple_choice", "code", "preference", "open_ended")}
    assert len(rendered) == 4


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


ROWS = [  # the row shapes evr1-train trains on: inline and missing markers, several media, text only, option maps
    {"problem": "<video>What colour is the moving square?", "options": ["A. red", "B. blue"],
     "problem_type": "multiple choice", "videos": ["v.mp4"]},
    {"problem": "Does the <image> appear in the <video>?", "answer": "yes", "problem_type": "boolean",
     "images": ["i.png"], "videos": ["v.mp4"]},
    {"problem": "Which clip is longer, the first or the second?", "options": ["A. first", "B. second"],
     "problem_type": "multiple choice", "videos": ["a.mp4", "b.mp4"]},
    {"problem": "What is 2+2?\\nThink.", "answer": "4", "problem_type": "numerical"},
    {"problem": "<image>How many squares?", "answer": "3", "problem_type": "numerical", "images": ["i.png"]},
    {"problem": "Pick one.", "options": {"A": "left", "B": "right"}, "problem_type": "mcq", "videos": ["v.mp4"]},
    {"problem": "When is the square visible? ", "answer": '{"time": [1, 2]}', "problem_type": "temporal grounding",
     "videos": ["v.mp4"]},
]  # fmt: skip


@pytest.mark.parametrize("think", [True, False])
@pytest.mark.parametrize("row", ROWS, ids=[str(i) for i in range(len(ROWS))])
def test_the_chat_prompt_is_the_trainers(row: dict, think: bool) -> None:
    """What reaches the chat template — text segments and media in order — is the trainer's (`row_messages`),
    rendered with the quickstart's real Qwen2.5-VL template; evr1-eval loads the row as its `evr1_data` benchmark."""
    import json
    import tempfile
    from pathlib import Path

    from evr1_eval.backends.base import ImageInput, Request, VideoInput
    from evr1_eval.benchmarks import get_benchmark
    from evr1_eval.protocol import ProtocolSettings
    from evr1_train.data.row import row_messages
    from evr1_train.quickstart.tokenizer import QWEN2_5_VL_CHAT_TEMPLATE, train_tiny_tokenizer

    tok = train_tiny_tokenizer(vocab_size=300)
    opts = DataOptions(video_source="decode", think=think, media_root="/data")
    ours_row = {"problem_id": "r", "answer": "A", **row}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "evr1_data.jsonl").write_text(json.dumps(ours_row) + "\n")
        loaded = get_benchmark("evr1_data").load(Path(tmp) / "evr1_data.jsonl", Path("/data"),
                                                 protocol=ProtocolSettings(protocol="evr1", evr1=Evr1Settings(think=think)))  # fmt: skip
    assert not loaded.errors, loaded.errors
    sample = loaded.samples[0]
    import numpy as np

    request = Request(id="r", prompt=sample.prompt, inline_media=True,
                      videos=tuple(VideoInput(np.zeros((2, 4, 4, 3), np.uint8), {}) for _ in sample.videos),
                      images=tuple(ImageInput(np.zeros((4, 4, 3), np.uint8)) for _ in sample.images))  # fmt: skip
    render = lambda msgs: tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True,  # noqa: E731
                                                  chat_template=QWEN2_5_VL_CHAT_TEMPLATE)  # fmt: skip
    assert render(request.messages()) == render(row_messages(ours_row, opts))
