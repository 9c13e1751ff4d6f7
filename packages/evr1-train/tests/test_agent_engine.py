"""Multi-turn agent episodes in the local engine (tiny random Qwen2.5-VL, CPU): two tool calls answered from the cache,
tool tokens masked out of the loss, and the episode's tokens, vision tensors and M-RoPE positions equal to one
processor call over the whole conversation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from evr1_cache import MediaLoader, SamplingSpec
from evr1_cache.families import get_family
from evr1_cache.testing import make_synthetic_video
from evr1_cache.tools import HERMES, ToolBudget, ToolCall, ToolConfig, ToolSession

pytestmark = pytest.mark.usefixtures("one_thread")

TOOLS = ToolConfig(
    fps=2.0, frame_max_pixels=3136, min_pixels=3136, zoom_fps=1.0, zoom_source_pixels=112 * 112,
    zoom_min_pixels=3136, zoom_max_pixels=3136,
)  # fmt: skip
OVERVIEW = SamplingSpec(nframes=4, fps=None, min_pixels=3136, max_pixels=3136)


@pytest.fixture(scope="module")
def setup(tiny_vl: Path, tmp_path_factory: pytest.TempPathFactory, one_thread: None) -> dict[str, Any]:
    from evr1_train.engine.batch import encode_prompt
    from evr1_train.engine.policy import load_policy, pick_runtime

    root = tmp_path_factory.mktemp("agent_engine")
    video = make_synthetic_video(root / "v.mp4", 60, 10.0, (112, 84))
    source = MediaLoader(root / "cache", write_cache=True)
    model, processor = load_policy(str(tiny_vl), pick_runtime("cpu"))
    family = get_family("qwen2_5_vl")
    got = source.frames(video, OVERVIEW)
    frames, meta = got.frames.copy(), got.meta  # the cache maps entries read-only; torch wants a writable array
    session = ToolSession(video, source, config=TOOLS, budget=ToolBudget(frames_per_call=4))
    messages = [
        {"role": "system", "content": session.system_text()},
        {"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "What colour is the square?"}]},
    ]
    prompt = encode_prompt(processor, messages, [], [(frames, meta)], family)
    return {"video": video, "source": source, "model": model, "processor": processor, "family": family,
            "overview": (frames, meta), "messages": messages, "prompt": prompt}  # fmt: skip


SCRIPT = [
    "Let me look closer. " + HERMES.render_call(ToolCall("get_frames", {"start": 1.0, "end": 3.0, "n": 4})),
    "And the detail: " + HERMES.render_call(ToolCall("zoom", {"time": 2.0, "box": [0.0, 0.0, 0.5, 0.5]})),
    "<answer>B</answer>",
]


def _episode(setup: dict[str, Any], script: list[str] = SCRIPT, **settings: Any) -> Any:
    from evr1_train.engine.agent import AgentSettings, ScriptedPolicy, run_episode

    processor = setup["processor"]
    eos = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    session = ToolSession(setup["video"], setup["source"], config=TOOLS, budget=ToolBudget(frames_per_call=4))
    policy = ScriptedPolicy(processor.tokenizer, script, eos)
    return run_episode(policy, processor, setup["prompt"], session, AgentSettings(**settings), setup["family"])


def test_two_tool_calls_masks_and_media(setup: dict[str, Any]) -> None:
    ep = _episode(setup)
    tok = setup["processor"].tokenizer
    assert [s.trained for s in ep.segments] == [True, False, True, False, True]
    assert ep.finished
    assert ep.final_text == "<answer>B</answer>"
    assert ep.session.stats.served == 2
    assert ep.session.stats.invalid == 0
    mask = ep.loss_mask
    assert len(mask) == len(ep.response_ids)
    model_tokens = [t for s in ep.segments if s.trained for t in s.ids.tolist()]
    assert sum(mask) == len(model_tokens)
    assert [t for t, m in zip(ep.response_ids, mask, strict=True) if m] == model_tokens
    video_id, image_id = (tok.convert_tokens_to_ids(t) for t in ("<|video_pad|>", "<|image_pad|>"))
    clip, crop = ep.segments[1], ep.segments[3]
    fam = setup["family"]
    frames = ep.session.turns[0].results[0].media[0].frames  # the 4 returned frames
    image = ep.session.turns[1].results[0].media[0].frames
    assert int((clip.ids == video_id).sum()) == fam.video_tokens(4, frames.shape[1], frames.shape[2])
    assert int((crop.ids == image_id).sum()) == fam.image_tokens(image.shape[0], image.shape[1])
    assert all(int((s.ids == video_id).sum()) == 0 for s in ep.segments if s.trained)  # no vision token is trained
    assert torch.equal(clip.vision["video_grid_thw"], torch.tensor([[2, frames.shape[1] // 14, frames.shape[2] // 14]]))
    assert "<tool_response>" in tok.decode(clip.ids)
    record = ep.record()
    (call,) = record["turns"][0]["calls"]
    assert call["name"] == "get_frames"
    assert len(call["media"][0]["timestamps"]) == 4


def test_episode_equals_one_processor_call_and_positions_continue(setup: dict[str, Any]) -> None:
    from evr1_train.engine.agent import tool_turn_text
    from evr1_train.engine.batch import collate_sequences, video_kwargs

    ep = _episode(setup)
    processor, fam = setup["processor"], setup["family"]
    tok = processor.tokenizer
    results = [t.results for t in ep.session.turns if t.results]
    text = processor.apply_chat_template(setup["messages"], add_generation_prompt=True, tokenize=False)
    text += tok.decode(ep.segments[0].ids) + tool_turn_text(processor, results[0], HERMES)
    text += tok.decode(ep.segments[2].ids) + tool_turn_text(processor, results[1], HERMES)
    text += tok.decode(ep.segments[4].ids)
    clip, crop = results[0][0].media[0], results[1][0].media[0]
    videos = [setup["overview"], (clip.frames, clip.meta)]
    kwargs = {**video_kwargs(videos), **fam.hf_kwargs([m for _, m in videos], images=True)}
    one = processor(text=[text], images=[crop.frames], return_tensors="pt", **kwargs)
    batch = collate_sequences([ep.training_prompt()], [ep.response_ids], 0, "cpu", None,
                              [ep.response_types] if ep.response_types is not None else None)  # fmt: skip
    assert torch.equal(batch["input_ids"], one["input_ids"])
    for key in ("pixel_values_videos", "video_grid_thw", "second_per_grid_ts", "pixel_values", "image_grid_thw"):
        assert torch.allclose(batch[key].float(), one[key].float()), key
    if "mm_token_type_ids" in one:
        assert torch.equal(batch["mm_token_type_ids"], one["mm_token_type_ids"])
    model = setup["model"]
    pos, _ = model.model.get_rope_index(
        batch["input_ids"], mm_token_type_ids=batch.get("mm_token_type_ids"), image_grid_thw=batch["image_grid_thw"],
        video_grid_thw=batch["video_grid_thw"], second_per_grid_ts=batch["second_per_grid_ts"],
        attention_mask=batch["attention_mask"],
    )  # fmt: skip
    ids = batch["input_ids"][0]
    video_id = tok.convert_tokens_to_ids("<|video_pad|>")
    vision_end = tok.convert_tokens_to_ids("<|vision_end|>")
    start = ep.prompt.length + int(ep.segments[0].ids.shape[0])  # the first tool answer
    span = range(start, start + int(ep.segments[1].ids.shape[0]))
    clip_pos = [i for i in span if int(ids[i]) == video_id]
    after = next(i for i in span if int(ids[i]) == vision_end and i > clip_pos[-1])
    # text after the tool's clip starts one past the clip's largest position (the reference rule, on every axis)
    assert int(pos[:, 0, after].min()) == int(pos[:, 0, clip_pos].max()) + 1
    assert bool((pos[0, 0, 1:] >= pos[0, 0, :-1]).all())  # temporal positions never go back across turns


def test_logprobs_follow_the_loss_mask(setup: dict[str, Any]) -> None:
    from evr1_train.engine.agent import episode_logprobs
    from evr1_train.engine.policy import pick_runtime

    ep = _episode(setup)
    short = _episode(setup, ["<answer>A</answer>"])
    logp, mask = episode_logprobs(setup["model"], [ep, short], pad_id=0, temperature=1.0, runtime=pick_runtime("cpu"))
    assert logp.shape == mask.shape == (2, len(ep.response_ids))
    assert mask[0].tolist() == ep.loss_mask
    assert mask[1].tolist()[: len(short.response_ids)] == [1] * len(short.response_ids)
    assert int(mask[1].sum()) == len(short.response_ids)
    assert bool(torch.isfinite(logp[0]).all())


def test_turn_and_token_budgets_end_the_episode(setup: dict[str, Any]) -> None:
    two = _episode(setup, max_turns=2)
    assert [s.trained for s in two.segments] == [True, False, True]  # no tool answer after the last turn
    assert not two.finished
    assert two.final_text == ""
    tight = _episode(setup, max_response_tokens=60)
    assert [s.trained for s in tight.segments] == [True]  # the clip's answer would not fit
    assert not tight.finished


def test_a_sampled_turn_from_the_model(setup: dict[str, Any]) -> None:
    from evr1_train.engine.agent import AgentSettings, ModelPolicy, run_episode
    from evr1_train.engine.policy import eos_ids, pick_runtime, vision_token_ids

    model, processor = setup["model"], setup["processor"]
    torch.manual_seed(0)
    policy = ModelPolicy(model, 0, eos_ids(model, processor.tokenizer), pick_runtime("cpu"),
                         suppress=vision_token_ids(processor.tokenizer, setup["family"]))  # fmt: skip
    session = ToolSession(setup["video"], setup["source"], config=TOOLS)
    ep = run_episode(policy, processor, setup["prompt"], session, AgentSettings(max_turns=2, max_turn_tokens=8))
    assert 1 <= len(ep.segments) <= 3
    assert all(int(s.ids.shape[0]) <= 8 for s in ep.segments if s.trained)
    assert session.stats.turns == sum(s.trained for s in ep.segments)
