"""The train -> eval settings file: one schema, the writer's JSON read back unchanged, bad files named field by field."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from evr1_cache import (
    TRAIN_SETTINGS_FILE,
    GenerationSettings,
    ImageSpec,
    PromptSettings,
    SamplingSpec,
    TrainSettings,
    TrainSettingsError,
    spec_record,
)

PROMPT = {
    "template": "{placeholders}{lead_in}\nQuestion: {question}{options}\n{instruction}",
    "placeholders": "<video>/<image> prepended, one per media item the question text does not place itself",
    "lead_in": {"video": "Watch the video carefully.", "text": "Read the question carefully."},
    "options": "\nOptions:\n{one option per line, as given in the row}",
    "instruction": "Give {answer_format} inside <answer></answer>.",
    "answer_format": {"multiple_choice": "the option letter", "default": "the final answer"},
    "problem_type_aliases": {"mcq": "multiple_choice"},
    "think": False,
    "system_prompt": None,
    "prompt_key": "problem",
}


def settings() -> TrainSettings:
    return TrainSettings(
        engine="local",
        mode="rl",
        base_model="/models/tiny",
        prompt=PromptSettings.from_json(PROMPT, "test"),
        video=spec_record(SamplingSpec(fps=2.0, max_frames=8)),
        image=spec_record(ImageSpec()),
        video_source="cache_only",
        chat_template="{{ messages }}",
        answer={"tag": "answer", "think": "optional"},
        generation=GenerationSettings(
            eos_token_ids=(258,),
            eos_tokens=("<|im_end|>",),
            pad_token_id=257,
            suppressed_token_ids=(266, 267),
            suppressed_tokens=("<|image_pad|>", "<|video_pad|>"),
            max_new_tokens=16,
            train={"do_sample": True, "temperature": 1.0},
            validation={"do_sample": False},
        ),
    )


def test_what_the_writer_writes_the_reader_reads_back_unchanged(tmp_path: Path) -> None:
    written = settings().with_step(40)
    (tmp_path / TRAIN_SETTINGS_FILE).write_text(json.dumps(written.to_json()))
    read = TrainSettings.read(tmp_path)
    assert read == written
    assert read.step == 40
    assert read.prompt.rules["options"] == PROMPT["options"]  # rules the schema does not type travel as written
    assert read.to_json()["prompt"] == PROMPT
    assert read.spec_keys() == {"video": SamplingSpec(fps=2.0, max_frames=8).key(), "image": ImageSpec().key()}
    assert "step" not in settings().to_json()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.update(version=2), r"version 2 is not one this reader knows \(1\); upgrade evr1"),
        (lambda r: r.update(version=True), "not one this reader knows"),
        (lambda r: r.update(format="other"), r"`format` is 'other', expected 'evr1-train-protocol'"),
        (lambda r: r.pop("generation"), "`generation` is missing"),
        (lambda r: r["generation"].update(max_new_tokens="16"), r"generation: `max_new_tokens` must be int, got str"),
        (lambda r: r["generation"].update(max_new_tokens=True), "`max_new_tokens` must be int, got bool"),
        (lambda r: r["generation"].update(eos_token_ids=["<eos>"]), "`eos_token_ids` must be a list of token ids"),
        (lambda r: r["prompt"].pop("lead_in"), r"prompt: `lead_in` is missing"),
        (lambda r: r["prompt"].update(think="no"), "`think` must be bool"),
        (lambda r: r["sampling"].pop("image"), r"sampling: `image` is missing"),
        (lambda r: r.update(chat_template=3), "`chat_template` must be str"),
    ],
)
def test_a_file_this_schema_cannot_read_is_named_with_its_field(tmp_path: Path, change: Any, message: str) -> None:
    record = copy.deepcopy(settings().to_json())
    change(record)
    (tmp_path / TRAIN_SETTINGS_FILE).write_text(json.dumps(record))
    with pytest.raises(TrainSettingsError, match=message) as info:
        TrainSettings.read(tmp_path)
    assert str(tmp_path / TRAIN_SETTINGS_FILE) in str(info.value)


def test_a_file_that_is_not_a_json_object_is_refused(tmp_path: Path) -> None:
    path = tmp_path / TRAIN_SETTINGS_FILE
    path.write_text("{not json")
    with pytest.raises(TrainSettingsError, match="not readable JSON"):
        TrainSettings.read(tmp_path)
    path.write_text("[]")
    with pytest.raises(TrainSettingsError, match="expected a JSON object, got list"):
        TrainSettings.read(tmp_path)
