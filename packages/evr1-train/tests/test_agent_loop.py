"""The `evr1_hybrid` agent loop on verl's real AgentLoopBase / SingleTurnAgentLoop, with a fake LLM server client."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytestmark = pytest.mark.verl


class FakeServer:
    """Stands in for verl's LLMServerClient: answers every request with fixed tokens and counts the calls."""

    def __init__(self, token_ids: list[int]) -> None:
        self.token_ids = token_ids
        self.calls = 0

    async def generate(self, **kwargs: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        self.calls += 1
        await asyncio.sleep(0)
        return TokenOutput(token_ids=list(self.token_ids), log_probs=[-0.5] * len(self.token_ids))


def _config(video_data: dict, budgets: tuple, n: int, response_length: int, hybrid: dict) -> Any:
    from omegaconf import OmegaConf

    video, image = budgets
    return OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "n": n,
                    "prompt_length": 4096,
                    "response_length": response_length,
                    "calculate_log_probs": True,
                }
            },
            "data": {
                "prompt_key": "problem",
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
            "evr1": {"hybrid": hybrid},
        }
    )


def _group(video_data, budgets, tiny_vl, n, response_length, hybrid, answer_text="<answer>B</answer>", sessions=None):
    """Run the n sessions of row v0's group as verl's legacy worker does (tasks created in slot order)."""
    from transformers import AutoProcessor, AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from evr1_train.data.dataset import Evr1Dataset
    from evr1_train.verl_hooks.agent_loop import Evr1HybridAgentLoop

    tok = AutoTokenizer.from_pretrained(tiny_vl)
    proc = AutoProcessor.from_pretrained(tiny_vl)
    cfg = _config(video_data, budgets, n, response_length, hybrid)
    ds = Evr1Dataset(str(video_data["built"]), tok, cfg.data, processor=proc)
    row = ds[0]
    server = FakeServer([*tok.encode(answer_text, add_special_tokens=False), tok.eos_token_id])

    async def run_all() -> list[Any]:
        loops = [
            Evr1HybridAgentLoop(
                trainer_config=DictConfigWrap(cfg),
                server_manager=server,
                tokenizer=tok,
                processor=proc,
                dataset_cls=Evr1Dataset,
                data_config=DictConfigWrap(cfg.data),
                hf_model_type="qwen2_5_vl",
            )
            for _ in range(n)
        ]
        extra = [{} for _ in loops] if sessions is None else [{"session_id": i, "global_steps": 7} for i in sessions]
        tasks = [
            asyncio.create_task(lp.run({"temperature": 1.0}, uid="u0", **row, **kw))
            for lp, kw in zip(loops, extra, strict=True)
        ]
        return await asyncio.gather(*tasks)

    return asyncio.run(run_all()), server, tok


def test_always_mode_returns_the_stored_trajectory_for_the_last_k(video_data, budgets, tiny_vl) -> None:
    outs, server, tok = _group(video_data, budgets, tiny_vl, n=4, response_length=64, hybrid={"enable": True, "k": 1})
    assert server.calls == 3  # the offline slot never reaches the LLM server
    flags = [o.extra_fields["evr1_offline"] for o in outs]
    assert flags == [0, 0, 0, 1]
    off = outs[3]
    assert tok.decode(off.response_ids, skip_special_tokens=True).endswith("<answer>B</answer>")
    assert off.response_ids[-1] == tok.eos_token_id  # EOS appended: the stored text carries none
    assert off.response_mask == [1] * len(off.response_ids)
    assert off.response_logprobs == [0.0] * len(off.response_ids)  # behaviour prob 1 (LUFFY assumption)
    assert off.prompt_ids == outs[0].prompt_ids  # same prompt (video tokens included) as the sampled rollouts
    assert off.multi_modal_data["videos"][0][0].shape == outs[0].multi_modal_data["videos"][0][0].shape


def test_overlong_stored_trajectory_truncated_or_skipped(video_data, budgets, tiny_vl) -> None:
    outs, _, _ = _group(video_data, budgets, tiny_vl, n=2, response_length=5, hybrid={"enable": True, "k": 1})
    assert outs[1].extra_fields["evr1_offline"] == 1
    assert outs[1].extra_fields["evr1_offline_truncated"] == 1
    assert len(outs[1].response_ids) == 5
    assert "truncated" in outs[1].extra_fields["evr1_hybrid_reason"]
    outs, server, _ = _group(
        video_data, budgets, tiny_vl, n=2, response_length=5, hybrid={"enable": True, "k": 1, "overlong": "skip"}
    )
    assert [o.extra_fields["evr1_offline"] for o in outs] == [0, 0]
    assert server.calls == 2
    assert "skipped" in outs[1].extra_fields["evr1_hybrid_reason"]


@pytest.mark.parametrize(("answer", "offline_used"), [("<answer>A</answer>", True), ("<answer>B</answer>", False)])
def test_below_accuracy_gate_scores_the_online_rollouts(video_data, budgets, tiny_vl, answer, offline_used) -> None:
    hybrid = {"enable": True, "k": 1, "mode": "below_accuracy", "accuracy_threshold": 0.5}
    outs, server, _ = _group(video_data, budgets, tiny_vl, n=3, response_length=64, hybrid=hybrid, answer_text=answer)
    assert outs[2].extra_fields["evr1_offline"] == int(offline_used)
    assert server.calls == (2 if offline_used else 3)
    assert ("online accuracy 0.000 < 0.500" if offline_used else ">= 0.500") in outs[2].extra_fields[
        "evr1_hybrid_reason"
    ]


def test_disabled_hybrid_is_a_plain_single_turn_loop(video_data, budgets, tiny_vl) -> None:
    outs, server, _ = _group(video_data, budgets, tiny_vl, n=2, response_length=64, hybrid={"enable": False})
    assert server.calls == 2
    assert [o.extra_fields["evr1_offline"] for o in outs] == [0, 0]


def test_v1_session_ids_pick_the_slot_whatever_the_task_order(video_data, budgets, tiny_vl) -> None:
    """verl's V1 worker passes `session_id`; the stored trajectory goes to session n-1 even if it starts first."""
    outs, server, _ = _group(
        video_data, budgets, tiny_vl, n=3, response_length=64, hybrid={"enable": True, "k": 1}, sessions=[2, 0, 1]
    )
    assert [o.extra_fields["evr1_offline"] for o in outs] == [1, 0, 0]
    assert server.calls == 2
    assert outs[0].extra_fields["min_global_steps"] == 7  # V1 staleness tags for the stored trajectory
