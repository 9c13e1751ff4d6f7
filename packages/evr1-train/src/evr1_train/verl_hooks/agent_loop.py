"""`evr1_hybrid` agent loop: verl's single-turn loop, except that k of the n rollouts of a group with a stored
trajectory return that trajectory (tokenised, EOS-terminated, fitted to the response limit) instead of sampling.

Why an agent loop: it is verl's per-sample hook, so reward, GRPO grouping (uid), old-log-prob recomputation and the
update run unchanged on the mixed group — no trainer fork (EasyVideoR1 overwrote rollouts inside its vLLM worker).

Modes (`evr1.hybrid`, see HybridConfig): "always" — offline slots never sample; "below_accuracy" — offline slots wait
for the group's online rollouts, score them with the configured reward function, and use the stored trajectory only
when the mean accuracy is below the threshold (else they sample like the others). Every output carries
`extra_fields["evr1_offline"]` (1/0) plus the reason, read by the `evr1` trainer's metrics and loss.

Use: actor_rollout_ref.rollout.agent.default_agent_loop=evr1_hybrid (the plugin registers the name).
Names (stable): Evr1HybridAgentLoop, AGENT_NAME
"""

from __future__ import annotations

import logging
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

from evr1_train.hybrid import OFFLINE_FIELD, OFFLINE_TEXT_FIELD, HybridConfig, fit_offline_response, gate, offline_slots
from evr1_train.verl_hooks.group_board import BOARD

logger = logging.getLogger(__name__)

AGENT_NAME = "evr1_hybrid"
GATE_TIMEOUT_S = 1800.0


def hybrid_config_of(config: Any) -> HybridConfig:
    node = config.get("evr1", {}).get("hybrid", None) if hasattr(config, "get") else None
    return HybridConfig.from_mapping(node)


class Evr1HybridAgentLoop(SingleTurnAgentLoop):  # type: ignore[misc]  # verl's SingleTurnAgentLoop is Any to mypy (verl.*: follow_imports=skip, not installed for typecheck)
    """Single-turn rollouts with stored trajectories mixed into k of n slots."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hybrid = hybrid_config_of(self.config)
        self._reward_fn: Any = None

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        n = int(self.rollout_config.n)
        uid = str(kwargs.get("uid", kwargs.get("index", "")))
        session = kwargs.pop("session_id", None)
        slot = int(session) if session is not None else BOARD.claim_slot(uid, n)  # before any await
        text = kwargs.pop(OFFLINE_TEXT_FIELD, "") or ""
        if not self.hybrid.enable or not text or n < 2 or slot not in offline_slots(n, self.hybrid):
            out = await self._sample(sampling_params, **kwargs)
            if self.hybrid.enable and text and self.hybrid.mode == "below_accuracy":
                await BOARD.post_accuracy(uid, await self._accuracy(out, kwargs))
            return self._mark(out, offline=False, reason="sampled")

        accs = None  # "always": no online accuracies to wait for
        if self.hybrid.mode == "below_accuracy":
            accs = await BOARD.wait_accuracies(uid, n - self.hybrid.k, GATE_TIMEOUT_S)
            if slot == n - 1:
                BOARD.release(uid)
        decision = gate(self.hybrid, accs)
        if not decision.use_offline:
            out = await self._sample(sampling_params, **kwargs)
            return self._mark(out, offline=False, reason=decision.reason)
        return await self._offline(text, sampling_params, decision.reason, **kwargs)

    async def _sample(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """One sampled rollout: verl's single turn here; `evr1_agent` samples a multi-turn episode with tools."""
        out: AgentLoopOutput = await SingleTurnAgentLoop.run(self, sampling_params, **kwargs)
        return out

    async def _offline(self, text: str, sampling_params: dict[str, Any], reason: str, **kwargs: Any) -> AgentLoopOutput:
        messages = list(kwargs["raw_prompt"])
        mm = await self.process_multi_modal_info(messages)
        self._assert_mm_supported(bool(mm))
        prompt_ids = await self.ct_build_initial_tokens(
            messages, images=mm.get("images"), videos=mm.get("videos"), audios=mm.get("audios"), mm_inputs_out={}
        )
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        fitted = fit_offline_response(ids, self.response_length, self.tokenizer.eos_token_id, self.hybrid)
        if fitted.skipped or fitted.truncated:
            logger.warning("evr1 hybrid: uid %s: %s", kwargs.get("uid"), fitted.reason)
        if fitted.skipped:
            out = await self._sample(sampling_params, **kwargs)
            return self._mark(out, offline=False, reason=fitted.reason)
        want_logprobs = bool(self.rollout_config.get("calculate_log_probs", False))
        logprobs = [0.0] * len(fitted.token_ids) if want_logprobs else None  # behaviour prob 1 (LUFFY assumption)
        merge, mask, aligned = await self.ct_merge_assistant_token(
            prompt_ids, list(fitted.token_ids), [], [] if want_logprobs else None, assistant_logprobs=logprobs
        )
        response_ids = merge.token_ids[-len(mask) :] if mask else []
        prompt_ids = merge.token_ids[: len(merge.token_ids) - len(mask)]
        out = AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids[: self.response_length],
            response_mask=mask[: self.response_length],
            response_logprobs=aligned[: self.response_length] if aligned else None,
            multi_modal_data=mm,
            mm_processor_kwargs=self._get_mm_processor_kwargs(mm.get("audios")),
            num_turns=2,
            metrics=AgentLoopMetrics(),
            extra_fields={"turn_scores": [], "tool_rewards": []},
        )
        reason = fitted.reason or reason
        return self._mark(out, offline=True, reason=reason, truncated=fitted.truncated, step=kwargs.get("global_steps"))

    @staticmethod
    def _mark(
        out: AgentLoopOutput, offline: bool, reason: str, truncated: bool = False, step: int | None = None
    ) -> AgentLoopOutput:
        """Tag `out` offline/online with the reason; `step`: a stored trajectory's step (V1 staleness tags: it is as
        fresh as the step that uses it)."""
        if step is not None:
            out.extra_fields.update(min_global_steps=step, max_global_steps=step)
        out.extra_fields[OFFLINE_FIELD] = int(offline)
        out.extra_fields["evr1_offline_truncated"] = int(truncated)
        out.extra_fields["evr1_hybrid_reason"] = reason
        return out

    async def _accuracy(self, out: AgentLoopOutput, kwargs: dict[str, Any]) -> float:
        """Score one online rollout with the configured reward function (for the below_accuracy gate only)."""
        text = self.tokenizer.decode(out.response_ids, skip_special_tokens=True)
        return (await self._answer_scores(text, kwargs))["accuracy"]

    async def _answer_scores(self, text: str, kwargs: dict[str, Any]) -> dict[str, float]:
        """{score, accuracy, format} of `text` by the configured reward function (`reward.custom_reward_function`)."""
        import inspect

        fn = self._reward()
        call = {
            "data_source": kwargs.get("data_source", "evr1"),
            "solution_str": text,
            "ground_truth": (kwargs.get("reward_model") or {}).get("ground_truth"),
            "extra_info": dict(kwargs.get("extra_info") or {}),
            **dict(self.config.reward.custom_reward_function.get("reward_kwargs") or {}),
        }
        if inspect.iscoroutinefunction(fn):
            result = await fn(**call)
        else:  # rule rewards can be CPU-heavy (code, math): keep the event loop free
            result = await self.loop.run_in_executor(None, lambda: fn(**call))
        result = result if isinstance(result, dict) else {"score": float(result)}  # a bare score is also the accuracy
        score = float(result.get("score", 0.0))
        return {
            "score": score,
            "accuracy": float(result.get("accuracy", score)),
            "format": float(result.get("format", 0.0)),
        }

    def _reward(self) -> Any:
        if self._reward_fn is None:
            from verl.utils.import_utils import load_extern_object

            node = self.config.reward.custom_reward_function
            if not node.get("path"):
                raise ValueError(
                    "evr1.hybrid.mode=below_accuracy scores online rollouts with reward.custom_reward_function; "
                    "set reward.custom_reward_function.path=pkg://evr1_rewards.integrations.verl"
                )
            self._reward_fn = load_extern_object(node.path, node.get("name") or "compute_score")
        return self._reward_fn
