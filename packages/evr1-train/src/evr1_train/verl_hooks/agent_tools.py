"""`evr1_agent` agent loop: multi-turn rollouts with evr1's tools (frames and crops served from the cache) in verl.

verl's own `ToolAgentLoop` raises `NotImplementedError` when a tool returns video; here a tool's clip or crop goes
into the next turn as the processor's input: the tools' answer turn is rendered by the model's chat template and
expanded by the processor exactly as the local engine does (`engine.agent.encode_tool_turn`), its tokens get
response mask 0, and its frames are appended to the sample's `multi_modal_data` (videos as `(frames [T,3,H,W],
metadata)` with `do_sample_frames=False`, images as PIL) in order, so verl's postprocess recomputes the same vision
tensors and M-RoPE positions over the whole sequence and vLLM receives the same media with every request.

It is the hybrid loop (`evr1_hybrid`) with multi-turn sampling: offline slots replay a stored expert trajectory
with tool calls (its turns split at the calls, the tools' answers recomputed from the cache, log-probs 0 as for any
stored trajectory), so "the model never calls the tool" is cured with the same k-of-n mixing.

The episode's reward is scored here (verl then skips its reward loop for the sample): the configured reward
function on the last turn's text outside any call, shaped by `evr1.agent.shaping` (`evr1_rewards.agent_reward`:
costs only subtract), each part in `reward_extra_info`; the turn record (calls, arguments, frame timestamps,
errors) in `extra_fields["evr1_agent"]`.

Use: actor_rollout_ref.rollout.agent.default_agent_loop=evr1_agent, settings in `evr1.agent` (see AgentSettings).
Names (stable): Evr1AgentLoop, AGENT_TOOLS_NAME
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput

from evr1_cache.families import family_of_processor
from evr1_cache.tools import ToolSession
from evr1_train.data.options import DataOptions
from evr1_train.engine.agent import AgentSettings, encode_tool_turn, tool_session
from evr1_train.verl_hooks.agent_loop import Evr1HybridAgentLoop

logger = logging.getLogger(__name__)

AGENT_TOOLS_NAME = "evr1_agent"

#: (token ids, log-probs) of the next model turn, given the context ids and the room left.
NextTurn = Callable[[list[int], int, list[Any], list[Any]], Awaitable[tuple[list[int], list[float]]]]


class Evr1AgentLoop(Evr1HybridAgentLoop):
    """Multi-turn rollouts with evr1's tools; stored trajectories with tool calls mixed in as the hybrid loop does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        node = self.config.get("evr1", {}).get("agent", None) if hasattr(self.config, "get") else None
        self.agent = AgentSettings.from_mapping(node)
        self.opts = DataOptions.from_mapping(self.data_config.get("evr1", None))
        self.family = family_of_processor(self.processor)

    # -- the two ways a turn is produced ------------------------------------------------------------------------
    async def _sample(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        request = uuid.uuid4().hex

        async def sampled(
            ids: list[int], room: int, images: list[Any], videos: list[Any]
        ) -> tuple[list[int], list[float]]:
            out = await self.server_manager.generate(
                request_id=request,
                prompt_ids=ids,
                sampling_params={**sampling_params, "max_tokens": room},
                image_data=list(images) or None,  # a snapshot: the episode appends the tools' media later
                video_data=list(videos) or None,
                mm_processor_kwargs=self._get_mm_processor_kwargs(None),
            )
            tokens = list(out.token_ids)[:room]
            return tokens, list(out.log_probs or [0.0] * len(tokens))[: len(tokens)]

        return await self._episode(sampled, **kwargs)

    async def _offline(self, text: str, sampling_params: dict[str, Any], reason: str, **kwargs: Any) -> AgentLoopOutput:
        turns = iter(self._session_format().split_turns(text))
        eos = int(self.tokenizer.eos_token_id)

        async def replayed(
            ids: list[int], room: int, images: list[Any], videos: list[Any]
        ) -> tuple[list[int], list[float]]:
            turn = next(turns, "")
            tokens = [*self.tokenizer.encode(turn, add_special_tokens=False)[: max(0, room - 1)], eos]
            return tokens, [0.0] * len(tokens)  # behaviour prob 1, as every stored trajectory (LUFFY assumption)

        out = await self._episode(replayed, **kwargs)
        return self._mark(out, offline=True, reason=reason, step=kwargs.get("global_steps"))

    def _session_format(self) -> Any:
        from evr1_cache.tools import call_format

        return call_format(self.agent.tool_config.family or (self.family.name if self.family else None))

    # -- one episode -----------------------------------------------------------------------------------------------
    async def _episode(self, next_turn: NextTurn, **kwargs: Any) -> AgentLoopOutput:
        from PIL import Image

        from evr1_train.data.dataset import _to_tchw

        messages = list(kwargs["raw_prompt"])
        session = self._session(messages)
        if session is not None:
            messages = session.instruct(messages)
        mm = await self.process_multi_modal_info(messages)
        self._assert_mm_supported(bool(mm))
        images, videos = list(mm.get("images") or []), list(mm.get("videos") or [])
        prompt_ids = await self.ct_build_initial_tokens(
            messages, images=images or None, videos=videos or None, mm_inputs_out={}
        )
        ids: list[int] = list(prompt_ids)
        mask: list[int] = []
        logprobs: list[float] = []
        final, turns = "", 0
        for turn in range(self.agent.max_turns):
            room = min(self.agent.max_turn_tokens, self.response_length - len(mask))
            if room < 1:
                break
            tokens, lps = await next_turn(ids, room, images, videos)
            turns += 1
            ids += tokens
            mask += [1] * len(tokens)
            logprobs += lps
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
            if session is None:
                final = text
                break
            answer = session.answer(text)
            if answer.final:
                final = answer.parsed.content
                break
            if turn == self.agent.max_turns - 1:
                break
            segment = await self.loop.run_in_executor(
                None, encode_tool_turn, self.processor, self.family, answer.results, session.format
            )
            extra = [int(t) for t in segment.ids.tolist()]
            if len(mask) + len(extra) >= self.response_length:
                break
            ids += extra
            mask += [0] * len(extra)
            logprobs += [0.0] * len(extra)
            for result in answer.results:
                for media in result.media:
                    if media.kind == "image":
                        images.append(Image.fromarray(media.frames))
                    elif media.meta is not None:
                        videos.append((_to_tchw(media.frames.copy()), media.meta.to_hf()))
        out = AgentLoopOutput(
            prompt_ids=list(prompt_ids),
            response_ids=ids[len(prompt_ids) :][: self.response_length],
            response_mask=mask[: self.response_length],
            response_logprobs=logprobs[: self.response_length]
            if self.rollout_config.get("calculate_log_probs")
            else None,
            multi_modal_data={**({"images": images} if images else {}), **({"videos": videos} if videos else {})},
            mm_processor_kwargs=self._get_mm_processor_kwargs(None),
            num_turns=2 * turns,
            metrics=AgentLoopMetrics(),
            extra_fields={"turn_scores": [], "tool_rewards": []},
        )
        await self._score(out, final, session, kwargs)
        return out

    def _session(self, messages: list[dict[str, Any]]) -> ToolSession | None:
        """Tools over the prompt's first video (None for a prompt without one: the episode is a single turn)."""
        return tool_session(messages, self.opts, self.agent, self._session_format().name)

    async def _score(
        self, out: AgentLoopOutput, final: str, session: ToolSession | None, kwargs: dict[str, Any]
    ) -> None:
        """The episode's reward: the reward function on the final answer, shaped by the call counts."""
        from evr1_rewards import RewardResult, agent_reward

        parts = await self._answer_scores(final, kwargs)
        stats = session.stats if session is not None else None
        calls, invalid = (stats.calls, stats.invalid + stats.malformed) if stats else (0, 0)
        answer = RewardResult(
            overall=parts["score"], accuracy=parts["accuracy"], format=parts["format"], problem_type=""
        )
        shaped = agent_reward(answer, calls, invalid, self.agent.shaping)
        out.reward_score = shaped.overall
        out.extra_fields["reward_extra_info"] = shaped.as_dict()
        out.extra_fields["evr1_agent"] = {**(session.record() if session else {}), "final_text": final}

    async def _accuracy(self, out: AgentLoopOutput, kwargs: dict[str, Any]) -> float:
        """The below_accuracy gate reads the episode's own score (its final answer, not the tools' turns)."""
        return float(out.extra_fields["reward_extra_info"]["accuracy"])
