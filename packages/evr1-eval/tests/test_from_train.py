"""`evr1-eval run --from-train`: a checkpoint's `evr1_train_protocol.json` (the layout docs/train.md documents, as
evr1-train's local engine writes it) becomes the run's prompt, chat template, frames and decoding; CLI settings that
differ are named in one warning; bad folders and unknown versions are refused in one line.

The real file written by the real trainer is read in the round-trip test (tests/test_roundtrip.py, `nox -s train`).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from evr1_cache import TrainSettings
from evr1_cache.testing import make_synthetic_video
from evr1_eval.cli import main
from evr1_eval.protocol import Evr1Settings
from evr1_eval.train_protocol import (
    TrainProtocolError,
    find_checkpoint,
    load_trained,
    read_protocol,
    settings_from_protocol,
)

TEMPLATE = "<|im_start|>{% for m in messages %}{{ m['role'] }}{% endfor %}"
VIDEO = {"fps": 2.0, "nframes": None, "min_frames": 4, "max_frames": 16, "min_pixels": 3136, "max_pixels": 3136,
         "total_pixels": None, "size_factor": 28}  # fmt: skip
IMAGE = {"min_pixels": 3136, "max_pixels": 3136, "size_factor": 28}


def protocol_record(step: int = 40, think: bool = False) -> dict[str, Any]:
    """What evr1-train's `engine/protocol.py` writes for the quickstart (docs/train.md, section 7)."""
    instruction = (
        "Think step by step inside <think></think>, then give {answer_format} inside <answer></answer>."
        if think
        else "Give {answer_format} inside <answer></answer>."
    )
    return {
        "format": "evr1-train-protocol",
        "version": 1,
        "engine": "local",
        "mode": "rl",
        "base_model": "runs/quickstart/model-init",
        "adapter": None,
        "prompt": {
            "template": "{placeholders}{lead_in}\nQuestion: {question}{options}\n{instruction}",
            "placeholders": "<video>/<image> prepended, one per media item the question text does not place itself",
            "lead_in": {
                "video+image": "Examine the video and the accompanying image carefully.",
                "video": "Watch the video carefully.",
                "image": "Examine the image carefully.",
                "text": "Read the question carefully.",
            },
            "options": "\nOptions:\n{one option per line, as given in the row}",
            "instruction": instruction,
            "answer_format": {
                "multiple_choice": "the option letter",
                "numerical": "a single number",
                "temporal_grounding": 'JSON {"time": [start_seconds, end_seconds]}',
                "default": "the final answer",
            },
            "problem_type_aliases": {"mcq": "multiple_choice"},
            "think": think,
            "system_prompt": None,
            "prompt_key": "problem",
            "answer_key": "answer",
            "answer_tag": "answer",
        },
        "answer": {"tag": "answer", "think": "optional", "reward_weights": {"accuracy": 0.9, "format": 0.1}},
        "sampling": {
            "video": {**VIDEO, "key": "0123456789abcdef"},
            "image": {**IMAGE, "key": "fedcba9876543210"},
            "video_source": "cache_only",
        },
        "chat_template": TEMPLATE,
        "add_generation_prompt": True,
        "generation": {
            "eos_token_ids": [258],
            "eos_tokens": ["<|im_end|>"],
            "pad_token_id": 257,
            "stop": "after the first token in eos_token_ids (it is part of the response)",
            "suppressed_token_ids": [266, 267, 265, 266, 268],
            "suppressed_tokens": ["<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>"],
            "max_new_tokens": 16,
            "train": {"do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": -1},
            "validation": {"do_sample": False},
        },
        "step": step,
    }


def schema(record: dict[str, Any]) -> TrainSettings:
    """A record as the reader holds it (the schema both sides share)."""
    return TrainSettings.from_json(record, "test record")


def make_run(root: Path, record: dict[str, Any] | None = None, steps: tuple[int, ...] = (20, 40)) -> Path:
    """A run folder in the local engine's layout: run-level record, checkpoints/step_N/{actor/, record}, latest.json."""
    run = root / "run"
    ckpts = run / "checkpoints"
    for step in steps:
        folder = ckpts / f"step_{step:06d}"
        (folder / "actor").mkdir(parents=True)
        (folder / "actor" / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl"}))
        (folder / "evr1_train_protocol.json").write_text(json.dumps(record or protocol_record(step)))
    (ckpts / "latest.json").write_text(json.dumps({"step": steps[-1], "path": f"step_{steps[-1]:06d}"}))
    (run / "evr1_train_protocol.json").write_text(json.dumps(record or protocol_record(steps[-1])))
    return run


def test_every_layout_finds_the_newest_checkpoint_and_its_model(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    step = run / "checkpoints" / "step_000040"
    for given in (run, run / "checkpoints", step, step / "actor", step / "evr1_train_protocol.json"):
        assert find_checkpoint(given) == (step, step / "actor"), given
    older = run / "checkpoints" / "step_000020"
    assert find_checkpoint(older) == (older, older / "actor")
    merged = tmp_path / "merged"  # `evr1-train merge` output: the model and the record in one folder
    merged.mkdir()
    (merged / "config.json").write_text("{}")
    (merged / "evr1_train_protocol.json").write_text(json.dumps(protocol_record()))
    assert find_checkpoint(merged) == (merged, merged)
    trained = load_trained(run)
    assert trained.step == 40
    assert trained.settings.source == f"train:{step}"


def test_the_record_becomes_the_evr1_settings() -> None:
    s = settings_from_protocol(schema(protocol_record()), "ckpt")
    assert s.think is False
    assert s.instruction_direct == "Give {format} inside <answer></answer>."
    assert s.answer_format("multiple_choice") == "the option letter"
    assert s.answer_format("mcq") == "the option letter"  # the trainer's aliases
    assert s.answer_format("ocr") == "the final answer"  # the recorded default, not evr1-eval's table
    assert dict(s.sampling) == VIDEO
    assert dict(s.image_sampling) == IMAGE
    assert s.generation == {"max_tokens": 16, "temperature": 0.0}  # greedy, as validation; training's 16 tokens
    assert s.stop_token_ids == (258,)
    assert s.suppress_token_ids == (266, 267, 265, 266, 268)
    assert s.resolved_chat_template() == TEMPLATE
    # the quickstart's rows place the video in the question: the marker stays there, as in the trainer's prompt
    text = s.render("multiple_choice", "<video>What colour is the moving square?", ["A. red", "B. blue"], n_videos=1)
    assert text == (
        "Watch the video carefully.\nQuestion: <video>What colour is the moving square?\nOptions:\nA. red\nB. blue\n"
        "Give the option letter inside <answer></answer>."
    )
    assert s.render("numerical", "How many?", [], n_videos=0, n_images=1).startswith("Examine the image carefully.")
    with pytest.raises(ValueError, match="2 <video>"):
        s.render("numerical", "<video><video>How many?", [], n_videos=1)
    sampled = protocol_record()
    sampled["generation"]["validation"]["do_sample"] = True
    assert settings_from_protocol(schema(sampled), "ckpt").generation["temperature"] == 1.0
    assert settings_from_protocol(schema(protocol_record(think=True)), "ckpt").think is True


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.update(version=2), r"version 2 .*upgrade evr1"),
        (lambda r: r.update(version="1"), "not one this reader knows"),
        (lambda r: r.update(format="something-else"), "format"),
        (lambda r: r.pop("generation"), "`generation` is missing"),
        (lambda r: r["generation"].update(max_new_tokens="16"), "max_new_tokens` must be int"),
        (lambda r: r["prompt"].update(options="(A) {option}"), "options rule"),
        (lambda r: r["prompt"].update(template="{lead_in} {novel_field}"), "field this reader lacks"),
        (lambda r: r["prompt"]["lead_in"].pop("image"), "lead_in lacks"),
        # every recorded type must be one evr1-rewards knows (the one vocabulary), with the file's own aliases
        (lambda r: r["prompt"]["answer_format"].update(colour_naming="a colour"), "answer_format: .*colour_naming"),
    ],
)
def test_records_this_version_cannot_reproduce_are_refused(tmp_path: Path, change: Any, message: str) -> None:
    record = copy.deepcopy(protocol_record())
    change(record)
    (tmp_path / "evr1_train_protocol.json").write_text(json.dumps(record))
    with pytest.raises(TrainProtocolError, match=message):
        settings_from_protocol(read_protocol(tmp_path), "x")


def test_folders_that_are_not_checkpoints_are_named(tmp_path: Path) -> None:
    with pytest.raises(TrainProtocolError, match="no such file or folder"):
        find_checkpoint(tmp_path / "missing")
    with pytest.raises(TrainProtocolError, match=r"no evr1_train_protocol\.json"):
        find_checkpoint(tmp_path)
    (tmp_path / "evr1_train_protocol.json").write_text("{not json")
    with pytest.raises(TrainProtocolError, match="not readable JSON"):
        read_protocol(tmp_path)
    lora = make_run(tmp_path / "lora", steps=(3,))
    actor = lora / "checkpoints" / "step_000003" / "actor"
    (actor / "config.json").unlink()
    (actor / "adapter_config.json").write_text("{}")
    with pytest.raises(TrainProtocolError, match="LoRA adapter; merge it"):
        find_checkpoint(lora)


# -- through the CLI ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def heldout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two video rows and one image row in evr1-train's schema, as `evr1-train export-heldout` writes them."""
    root = tmp_path_factory.mktemp("heldout")
    for i in range(2):
        make_synthetic_video(root / f"clip{i}.mp4", n_frames=24, fps=8.0, size=(112, 112))
    from PIL import Image

    Image.new("RGB", (112, 112), (200, 30, 30)).save(root / "still.png")
    options = ["A. red", "B. green", "C. blue", "D. yellow"]
    rows = [
        {"problem_id": "heldout-00000", "problem": "<video>What colour is the moving square?", "options": options,
         "answer": "A", "problem_type": "multiple_choice", "videos": [str(root / "clip0.mp4")], "images": [],
         "kind": "colour"},
        {"problem_id": "heldout-00001", "problem": "<video>How many squares are there?", "options": [],
         "answer": "2", "problem_type": "numerical", "videos": [str(root / "clip1.mp4")], "images": [],
         "kind": "count"},
        {"problem_id": "heldout-00002", "problem": "<image>What colour is the square?", "options": options,
         "answer": "A", "problem_type": "multiple_choice", "videos": [], "images": [str(root / "still.png")],
         "kind": "image_colour"},
    ]  # fmt: skip
    (root / "evr1_data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def _run(heldout: Path, run: Path, out: Path, *extra: str) -> int:
    return main(
        ["run", "--from-train", str(run), "--backend", "fake", "--engine-kwargs",
         json.dumps({"response": "<answer>A</answer>"}), "--benchmarks", "evr1_data", "--annotations-dir",
         str(heldout), "--out", str(out), "--no-progress", *extra]
    )  # fmt: skip


def test_run_from_train_uses_the_training_settings(heldout: Path, tmp_path: Path, capsys: Any) -> None:
    run = make_run(tmp_path)
    out = tmp_path / "eval"
    assert _run(heldout, run, out) == 0
    err = capsys.readouterr().err
    assert "with its training settings" in err
    assert "warning" not in err
    manifest = json.loads((out / "evr1_data" / "manifest.json").read_text())
    assert manifest["protocol"]["protocol"] == "evr1"
    assert manifest["generation"]["max_tokens"] == 16
    assert manifest["generation"]["stop_token_ids"] == [258]
    assert manifest["generation"]["suppress_token_ids"] == [266, 267, 265, 266, 268]
    assert {k: manifest["sampling"][k] for k in VIDEO} == VIDEO
    assert manifest["model"] == str(run / "checkpoints" / "step_000040" / "actor")
    settings = json.loads((out / "evr1_data" / "run.json").read_text())
    assert settings["info"]["from_train"]["step"] == 40
    summary = json.loads((out / "evr1_data" / "summary.json").read_text())
    assert summary["metrics"]["kind/colour"] == 100.0
    assert summary["metrics"]["kind/count"] == 0.0
    assert summary["metrics"]["kind/image_colour"] == 100.0
    rows = [json.loads(x) for x in (out / "evr1_data" / "results.jsonl").read_text().splitlines()]
    assert {r["id"] for r in rows} == {"heldout-00000", "heldout-00001", "heldout-00002"}


def test_settings_that_differ_from_training_are_named_once(heldout: Path, tmp_path: Path, capsys: Any) -> None:
    run = make_run(tmp_path)
    rc = _run(heldout, run, tmp_path / "eval", "--max-tokens", "1024", "--sampling", "fps=1", "--stop", "</answer>",
              "--system-prompt", "Be brief.")  # fmt: skip
    assert rc == 0
    err = capsys.readouterr().err
    assert err.count("warning:") == 1
    assert "4 evaluation setting(s) differ" in err
    assert "max_tokens: 1024 here, 16 in training" in err
    assert "evr1_data frames.fps: 1.0 here, 2.0 in training" in err
    assert "stop: ['</answer>'] here, [] in training" in err
    assert "system prompt: 'Be brief.' here, None in training" in err


def test_from_train_refuses_conflicting_protocol_settings(heldout: Path, tmp_path: Path, capsys: Any) -> None:
    run = make_run(tmp_path)
    assert _run(heldout, run, tmp_path / "a", "--protocol", "official") == 2
    assert "drop --protocol official" in capsys.readouterr().err
    settings = tmp_path / "s.json"
    settings.write_text("{}")
    assert _run(heldout, run, tmp_path / "b", "--evr1-settings", str(settings)) == 2
    assert "pass one of them" in capsys.readouterr().err
    assert _run(heldout, tmp_path / "nowhere", tmp_path / "c") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no such file or folder" in err


def test_the_default_evr1_settings_are_the_recorded_quickstart_ones() -> None:
    """evr1-eval's built-in evr1 settings (no --from-train) reproduce the same trainer's prompt."""
    default, recorded = Evr1Settings(think=False), settings_from_protocol(schema(protocol_record()), "x")
    for args in (("multiple_choice", "<video>What?", ["A. x"]), ("temporal_grounding", "When?", [])):
        assert default.render(*args) == recorded.render(*args)
    # without a record, each type is asked for what its scorer reads (evr1-rewards), code and preference included
    assert default.answer_format("python") == "the complete program, without Markdown fences"
    assert default.answer_format("llava") == '"Response 1", "Response 2" or "Tie"'
    assert default.answer_format("not a type") == "the final answer"


def test_a_trained_agent_is_evaluated_with_its_own_tools(heldout: Path, tmp_path: Path) -> None:
    """A record with `agent` (what `evr1-train engine.agent=true` writes): no --tools needed, the trained tools,
    turns, budgets and sampling are the run's, and every video row records its turns."""
    record = protocol_record()
    record["agent"] = {
        "tools": ["get_frames"], "max_turns": 2, "max_turn_tokens": 8, "max_response_tokens": 160,
        "budget": {"frames_per_call": 8, "calls_per_turn": 1, "calls_per_episode": 1, "pixels_per_episode": 25088},
        "tool_config": {"fps": 4.0, "frame_max_pixels": 3136, "min_pixels": 3136},
    }  # fmt: skip
    assert schema(record).agent == record["agent"]  # the shared schema keeps it as written
    run = make_run(tmp_path, record)
    out = tmp_path / "eval"
    assert _run(heldout, run, out, "--cache-dir", str(tmp_path / "cache")) == 0
    fingerprint = json.loads((out / "evr1_data" / "run.json").read_text())["fingerprint"]
    agent = fingerprint["agent"]  # part of the run's fingerprint: rows with and without tools never mix
    assert agent["tools"] == ["get_frames"]
    assert agent["max_turns"] == 2
    assert agent["max_turn_tokens"] == 8
    assert agent["budget"]["calls_per_episode"] == 1
    assert agent["config"]["fps"] == 4.0
    assert fingerprint["generation"]["max_tokens"] == 16  # the whole answer's limit stays the record's
    rows = {r["id"]: r for r in map(json.loads, (out / "evr1_data" / "results.jsonl").read_text().splitlines())}
    assert rows["heldout-00000"]["details"]["agent"]["final_text"] == "<answer>A</answer>"
    assert "agent" not in rows["heldout-00002"]["details"]  # an image row: no video for the tools, one turn
    plain = make_run(tmp_path / "plain")
    assert _run(heldout, plain, tmp_path / "eval-plain") == 0  # a record without `agent`: no tools
    assert "agent" not in json.loads((tmp_path / "eval-plain" / "evr1_data" / "run.json").read_text())["fingerprint"]
