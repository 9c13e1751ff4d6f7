"""The `evr1_agent` loop on verl 0.9.1's real agent-loop classes (CPU, a scripted LLM server): an episode with two tool
calls returning a clip and a crop from the cache, masked, fed back as multimodal inputs, and postprocessed by verl's
own `AgentLoopWorker` code into vision tensors and M-RoPE positions."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from evr1_cache.tools import HERMES, ToolCall

pytestmark = pytest.mark.verl

TURNS = [
    "Let me look. " + HERMES.render_call(ToolCall("get_frames", {"start": 0.5, "end": 2.5, "n": 4})),
    "Closer: " + HERMES.render_call(ToolCall("zoom", {"time": 1.0, "box": [0.0, 0.0, 0.5, 0.5]})),
    "<answer>B</answer>",
]
AGENT = {
    "max_turns": 4,
    "max_turn_tokens": 96,
    "tool_config": {
        "fps": 4.0,
        "frame_max_pixels": 3136,
        "min_pixels": 784,
        "zoom_fps": 2.0,
        "zoom_source_pixels": 12544,
        "zoom_min_pixels": 3136,
        "zoom_max_pixels": 3136,
    },
    "budget": {"frames_per_call": 4},
    "shaping": {"call_cost": 0.05},
}


class ScriptedServer:
    """Stands in for verl's LLMServerClient: answers the k-th request with the k-th scripted turn, recording the media
    each request carried."""

    def __init__(self, tok: Any, turns: list[str]) -> None:
        self.replies = [[*tok.encode(t, add_special_tokens=False), tok.eos_token_id] for t in turns]
        self.requests: list[dict[str, Any]] = []

    async def generate(self, **kwargs: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        self.requests.append(kwargs)
        await asyncio.sleep(0)
        ids = self.replies[min(len(self.requests), len(self.replies)) - 1]
        return TokenOutput(token_ids=list(ids), log_probs=[-0.5] * len(ids))


def _run(
    video_data: dict, budgets: tuple, tiny_vl: Path, turns: list[str], hybrid: dict, n: int = 1, stored: str = ""
) -> Any:
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.utils import hf_processor

    from evr1_train.data.dataset import Evr1Dataset
    from evr1_train.verl_hooks.agent_tools import Evr1AgentLoop

    video, image = budgets
    cfg = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {"n": n, "prompt_length": 4096, "response_length": 1024, "calculate_log_probs": True}
            },
            "data": {
                "prompt_key": "problem",
                "filter_overlong_prompts": False,  # no forked filter workers after the tools' threads ran
                "mm_processor_kwargs": {"do_resize": False},
                "evr1": {
                    "cache_dir": str(video_data["cache"]),
                    "video_source": "cache_only",
                    "video": video,
                    "image": image,
                },
            },
            "reward": {
                "custom_reward_function": {"path": "pkg://evr1_rewards.integrations.verl", "name": "compute_score"}
            },
            "evr1": {"hybrid": hybrid, "agent": AGENT},
        }
    )
    tok = AutoTokenizer.from_pretrained(tiny_vl)
    proc = hf_processor(str(tiny_vl))  # verl's: binds the model's get_rope_index to the processor
    row = Evr1Dataset(str(video_data["built"]), tok, cfg.data, processor=proc)[0]
    if stored:  # the row's stored trajectory, as a dataset column would hold it
        from evr1_train.hybrid import OFFLINE_TEXT_FIELD

        row[OFFLINE_TEXT_FIELD] = stored
    server = ScriptedServer(tok, turns)

    async def go() -> list[Any]:
        loops = [
            Evr1AgentLoop(trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=tok, processor=proc,
                          dataset_cls=Evr1Dataset, data_config=DictConfigWrap(cfg.data), hf_model_type="qwen2_5_vl")
            for _ in range(n)
        ]  # fmt: skip
        return list(await asyncio.gather(*(lp.run({"temperature": 1.0}, uid="u0", **row) for lp in loops)))

    return asyncio.run(go()), server, tok, proc, cfg


def _segments(mask: list[int]) -> list[int]:
    out: list[int] = []
    for m in mask:
        if not out or out[-1] != m:
            out.append(m)
    return out


def test_two_tool_calls_through_verls_agent_loop(video_data: dict, budgets: tuple, tiny_vl: Path) -> None:
    (out,), server, tok, proc, cfg = _run(video_data, budgets, tiny_vl, TURNS, {"enable": False})
    assert len(server.requests) == 3
    assert [len(r["video_data"] or []) for r in server.requests] == [1, 2, 2]  # the clip joins the next requests
    assert [len(r["image_data"] or []) for r in server.requests] == [0, 0, 1]  # then the crop
    assert _segments(out.response_mask) == [1, 0, 1, 0, 1]
    assert out.response_logprobs[:3] == [-0.5] * 3
    video_id, image_id = (tok.convert_tokens_to_ids(t) for t in ("<|video_pad|>", "<|image_pad|>"))
    tool_tokens = [t for t, m in zip(out.response_ids, out.response_mask, strict=True) if not m]
    assert video_id in tool_tokens
    assert image_id in tool_tokens
    assert all(t not in (video_id, image_id) for t, m in zip(out.response_ids, out.response_mask, strict=True) if m)
    assert "get_frames" in tok.decode(out.prompt_ids)  # the tool instructions are in the prompt
    record = out.extra_fields["evr1_agent"]
    assert [c["name"] for t in record["turns"] for c in t["calls"]] == ["get_frames", "zoom"]
    assert len(record["turns"][0]["calls"][0]["media"][0]["timestamps"]) == 4
    assert record["final_text"] == "<answer>B</answer>"
    info = out.extra_fields["reward_extra_info"]
    assert info["accuracy"] == 1.0
    assert info["tool_calls"] == 2.0
    assert out.reward_score == pytest.approx(info["answer"] - 0.1)  # two calls at 0.05: reported, subtracted
    # verl's own postprocess: the vision inputs of every media item and M-RoPE positions over the whole episode
    import torch
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    worker = AgentLoopWorker.__new__(AgentLoopWorker)
    worker.processor, worker.tokenizer, worker.mm_processor_kwargs = proc, tok, dict(cfg.data.mm_processor_kwargs)
    input_ids = torch.tensor([out.prompt_ids + out.response_ids])
    mm = worker._compute_multi_modal_inputs(out, input_ids)
    assert mm["video_grid_thw"].shape[0] == 2
    assert mm["image_grid_thw"].shape[0] == 1
    merge = proc.image_processor.merge_size**2
    assert int((input_ids == video_id).sum()) == int(mm["video_grid_thw"].prod(-1).sum()) // merge
    assert int((input_ids == image_id).sum()) == int(mm["image_grid_thw"].prod(-1).sum()) // merge
    pos = worker._compute_position_ids(input_ids, torch.ones_like(input_ids), mm, out.mm_processor_kwargs)
    assert pos.shape == (1, 4, input_ids.shape[1])
    assert torch.equal(pos[0, 0], torch.arange(input_ids.shape[1]))
    # the episode's tokens are what one processor call over the whole conversation gives (placeholders re-expanded)
    collapsed, prev = [], None
    for t in input_ids[0].tolist():
        if not (t in (video_id, image_id) and t == prev):
            collapsed.append(t)
        prev = t
    media = out.multi_modal_data
    one = proc(text=[tok.decode(collapsed)], images=media["images"], videos=[v for v, _ in media["videos"]],
               video_metadata=[m for _, m in media["videos"]], do_sample_frames=False, do_resize=False,
               return_tensors="pt")  # fmt: skip
    assert torch.equal(one["input_ids"], input_ids)


def test_stored_trajectory_with_tool_calls_is_an_offline_sample(
    video_data: dict, budgets: tuple, tiny_vl: Path
) -> None:
    """Hybrid k=1 of n=2: slot 1 replays a stored trajectory with two tool calls; its tools are served from the cache
    and their answers masked, exactly as for a sampled episode."""
    import json

    hybrid = {"enable": True, "k": 1}
    outs, server, _, _, _ = _run(
        video_data, budgets, tiny_vl, ["<answer>A</answer>"], hybrid, n=2, stored="".join(TURNS)
    )
    assert [o.extra_fields["evr1_offline"] for o in outs] == [0, 1]
    assert len(server.requests) == 1  # the offline slot never reaches the LLM server
    online, offline = outs
    assert _segments(online.response_mask) == [1]
    assert online.extra_fields["reward_extra_info"]["accuracy"] == 0.0
    assert _segments(offline.response_mask) == [1, 0, 1, 0, 1]
    assert offline.response_logprobs == [0.0] * len(offline.response_ids)
    record = offline.extra_fields["evr1_agent"]
    assert [c["name"] for t in record["turns"] for c in t["calls"] if c["ok"]] == ["get_frames", "zoom"]
    assert offline.extra_fields["reward_extra_info"]["accuracy"] == 1.0
    assert len(offline.multi_modal_data["videos"]) == 2
    assert len(offline.multi_modal_data["images"]) == 1
    assert json.dumps(record)  # JSON-ready for rollout dumps
