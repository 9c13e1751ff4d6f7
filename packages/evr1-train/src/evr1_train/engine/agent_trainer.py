"""`AgentTrainer`: the local engine's RL step over multi-turn episodes, the model calling tools served from the cache.

Why a subclass of `LocalTrainer`: everything but the rollout is the same step — hybrid k-of-n mixing, verl's
estimators and losses, the optimiser, checkpoints, validation. What changes is what a rollout is: an `Episode`
(`engine.agent`) whose response holds the model's turns (trained) and the tools' answers (text and vision tokens,
loss mask 0), whose forward sees the prompt's vision tensors followed by every tool's frames, and whose reward is the
router's on the final answer shaped by the call counts (`evr1_rewards.agent_reward`). A stored trajectory (hybrid
offline slot) is replayed turn by turn with its tools' answers recomputed from the cache, so it is the episode a
rollout making the same calls gets. With no tools offered (`evr1.agent.tools=[]`) every episode is one turn and a
stored trajectory keeps only its final answer: the same model trained without tools, for comparison.

Use: `engine.agent=true` with `evr1.agent.*` (AgentSettings); experiment `quickstart_agent`.
Names (stable): AgentTrainer
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from evr1_cache.tools import ToolSession, call_format, with_tool_instructions
from evr1_train.engine.agent import (
    AgentSettings,
    Episode,
    ScriptedPolicy,
    TurnPolicy,
    run_episodes,
    tool_instructions,
    tool_session,
)
from evr1_train.engine.base import Prompt, Rollout, StepTimer
from evr1_train.engine.batch import pad_responses
from evr1_train.engine.config import LocalConfig, plain
from evr1_train.engine.trainer import LocalTrainer
from evr1_train.errors import ConfigError
from evr1_train.hybrid.metrics import finite_mean as mean

__all__ = ["AgentTrainer", "agent_metrics"]


def agent_metrics(episodes: Sequence[Episode], prefix: str) -> dict[str, float]:
    """Tool use of a set of episodes: the share that got frames from at least one call (`tool_use_rate`), calls,
    invalid calls and model turns per episode, and the share that ended with an answer (not out of turns)."""
    if not episodes:
        return {}
    stats = [e.session.stats if e.session is not None else None for e in episodes]
    return {
        f"{prefix}/tool_use_rate": mean([float(e.served > 0) for e in episodes]),
        f"{prefix}/tool_calls": mean([float(s.calls) if s else 0.0 for s in stats]),
        f"{prefix}/tool_invalid": mean([float(s.invalid + s.malformed) if s else 0.0 for s in stats]),
        f"{prefix}/turns": mean([float(sum(seg.trained for seg in e.segments)) for e in episodes]),
        f"{prefix}/finished": mean([float(e.finished) for e in episodes]),
    }


class AgentTrainer(LocalTrainer):
    """The RL trainer with multi-turn episodes (see the module doc)."""

    def __init__(self, cfg: LocalConfig, *, ref_path: str | None = None) -> None:
        agent = AgentSettings.from_mapping(plain(cfg.agent_node))
        # the episode's response (model and tool tokens) is the trainer's response: data.max_response_length caps it
        self.agent = dataclasses.replace(
            agent, max_response_tokens=min(agent.max_response_tokens, cfg.max_response_length)
        )
        if cfg.adv_estimator == "remax":
            raise ConfigError(
                "algorithm.adv_estimator=remax needs a greedy single-turn baseline; not with engine.agent"
            )
        super().__init__(cfg, ref_path=ref_path)
        family = self.family.name if self.family is not None else None
        self.call_format = call_format(self.agent.tool_config.family or family)
        self.instructions = tool_instructions(self.agent, family)

    def describe(self) -> str:
        tools = ", ".join(self.agent.tools) or "none"
        return f"{super().describe()}, agent: tools {tools}, up to {self.agent.max_turns} turns"

    def _agent_record(self) -> dict[str, Any] | None:
        return self.agent.record()

    # -- prompts and episodes ----------------------------------------------------------------------------------
    def _prompt_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The tool instructions join the system turn of prompts that have a video (what tools look at)."""
        from evr1_train.data.row import media_items

        has_video = any(item["type"] == "video" for item in media_items(messages))
        return with_tool_instructions(messages, self.instructions) if self.instructions and has_video else messages

    def _session(self, prompt: Prompt) -> ToolSession | None:
        """The prompt's tools over its first video (None: no video, or no tools offered)."""
        from evr1_train.data.row import row_messages

        messages = row_messages(prompt.row or {}, self.data_opts)
        return tool_session(messages, self.data_opts, self.agent, self.call_format.name)

    def _episodes(
        self, policy: TurnPolicy, prompts: Sequence[Prompt], sessions: Sequence[ToolSession | None] | None = None
    ) -> list[Episode]:
        sessions = [self._session(p) for p in prompts] if sessions is None else sessions
        return run_episodes(policy, self.processor, [p.encoded for p in prompts], sessions, self.agent, self.family)

    # -- rollouts ----------------------------------------------------------------------------------------------
    def _offline_rollout(self, p: int, prompt: Prompt) -> Rollout:
        """The stored trajectory replayed through the tools: its model turns (split after each turn's calls); with
        no tools for the prompt, only its answer."""
        session = self._session(prompt)
        turns = self.call_format.split_turns(self._response_text(prompt.row or {}) or "")
        script = ScriptedPolicy(self.tokenizer, [turns if session is not None else turns[-1:]], int(self.eos[0]))
        (episode,) = self._episodes(script, [prompt], [session])
        return Rollout(p, episode.response_ids, True, episode=episode)

    def _sample(self, prompts: Sequence[Prompt], index: Sequence[int], do_sample: bool = True) -> list[Rollout]:
        episodes = self._episodes(self._policy(do_sample), prompts)
        return [Rollout(i, e.response_ids, False, episode=e) for i, e in zip(index, episodes, strict=True)]

    def _score(self, prompt: Prompt, seq: Rollout) -> None:
        """The router on the final answer, less the shaping of the calls (`evr1_rewards.agent_reward`)."""
        from evr1_rewards import agent_reward

        episode = seq.episode
        if episode is None:
            return super()._score(prompt, seq)
        seq.text = self.tokenizer.decode(seq.response, skip_special_tokens=True)
        stats = episode.session.stats if episode.session is not None else None
        calls, invalid = (stats.calls, stats.invalid + stats.malformed) if stats else (0, 0)
        shaped = agent_reward(self._reward(prompt, episode.final_text), calls, invalid, self.agent.shaping)
        seq.overall, seq.accuracy, seq.format = shaped.overall, shaped.accuracy, shaped.format
        seq.agent_reward = shaped.as_dict()
        self._overlong(seq, sum(episode.loss_mask))

    # -- the forward over whole episodes -----------------------------------------------------------------------
    def _forward_inputs(self, prompts: list[Prompt], seqs: list[Rollout], mb: Sequence[int]) -> dict[str, Any]:
        """Each episode whole: the prompt's ids with its and every tool's vision tensors, then all its turns."""
        episodes = [seqs[i].episode for i in mb]
        if any(e is None for e in episodes):
            return super()._forward_inputs(prompts, seqs, mb)
        types = [e.response_types for e in episodes if e is not None]
        return {
            "prompts": [e.training_prompt() for e in episodes if e is not None],
            "responses": [seqs[i].response for i in mb],
            "response_types": types if all(t is not None for t in types) else None,
        }

    def _response_mask(self, seqs: list[Rollout], width: int) -> torch.Tensor:
        """1 on the model's tokens only: the tools' text and vision tokens are context, never trained."""
        masks = [s.episode.loss_mask if s.episode is not None else [1] * len(s.response) for s in seqs]
        return pad_responses(masks, 0, width)[0].float().to(self.runtime.device)

    # -- metrics -----------------------------------------------------------------------------------------------
    def _answer_metrics(self, seqs: Sequence[Rollout], prefix: str) -> dict[str, float]:
        return agent_metrics([s.episode for s in seqs if s.episode is not None], f"{prefix}/agent")

    def _step_metrics(
        self, seqs: list[Rollout], resp_mask: torch.Tensor, adv: torch.Tensor, elapsed: float, timer: StepTimer
    ) -> dict[str, float]:
        out = super()._step_metrics(seqs, resp_mask, adv, elapsed, timer)
        online = [s for s in seqs if not s.offline]
        out.update(self._answer_metrics(online, "rollout"))
        parts = [s.agent_reward for s in online if s.agent_reward is not None]
        for key in ("answer", "tool_call_cost", "tool_invalid_penalty"):
            out[f"reward/agent/{key}"] = mean([p[key] for p in parts])
        return out
