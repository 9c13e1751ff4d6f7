"""`LocalTrainer`: one RL step at a time, in one process — rollout, reward, advantage, PPO update, validation.

Why a class with an explicit `step()`: tests drive it step by step (resume reproduces the next step; every estimator
runs one step), benchmarks time its phases, and `run()` wraps it with logging and checkpoints. It reuses the verl
path's pieces: rows -> prompts/pixels (`evr1_train.data`), hybrid planning (`evr1_train.hybrid`), rewards
(`evr1_rewards`), advantages and losses (verl's `core_algos`, via `engine.algorithms`). Model, optimiser, data order,
validation and the resumable state are `engine.base.BaseTrainer`'s.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import torch

from evr1_train.engine import algorithms
from evr1_train.engine.base import BaseTrainer, Prompt, Rollout, StepTimer
from evr1_train.engine.config import LocalConfig
from evr1_train.engine.policy import load_policy, token_logprobs
from evr1_train.hybrid.metrics import finite_mean as mean

logger = logging.getLogger(__name__)

__all__ = ["LocalTrainer", "Prompt", "Rollout", "StepTimer"]


class LocalTrainer(BaseTrainer):
    """The RL trainer: `step()` samples n rollouts per prompt, scores them, computes advantages and updates."""

    def __init__(self, cfg: LocalConfig, *, ref_path: str | None = None) -> None:
        super().__init__(cfg)
        self.ref_model = None
        #: LoRA's reference policy is the base model itself, run with the adapter switched off (peft's
        #: `disable_adapter()`), as verl 0.9.1 does for LoRA (`ref_in_actor`, trainer/ppo/v1/trainer_base.py): no second
        #: copy of the weights.
        self.ref_in_actor = self.lora and ref_path is None and (cfg.use_kl_loss or cfg.use_kl_in_reward)
        if (cfg.use_kl_loss or cfg.use_kl_in_reward) and not self.ref_in_actor:
            self.ref_model, _ = load_policy(ref_path or cfg.model_path, self.runtime)
            self.ref_model.eval().requires_grad_(False)
        self.actor_cfg = algorithms.actor_config(cfg)
        #: Called as on_rollout(step, prompts, seqs, advantages, response_mask) each step (rollout dumps).
        self.on_rollout: Callable[..., None] | None = None

    bar: ClassVar[Mapping[str, str]] = {
        "reward": "critic/score/mean",
        "acc": "critic/accuracy/mean",
        "len": "response_length/mean",
        "s/it": "timing_s/step",
    }

    def describe(self) -> str:
        cfg = self.cfg
        return (
            f"{super().describe()}, {cfg.adv_estimator} + {cfg.loss_mode}, n={cfg.n}, "
            f"hybrid={'on' if self.hybrid.enable else 'off'}"
        )

    def describe_short(self) -> str:
        return f"{self.cfg.adv_estimator}, hybrid={'on' if self.hybrid.enable else 'off'}"

    def _optimizer_steps_total(self) -> int:
        cfg = self.cfg
        return cfg.total_steps * cfg.ppo_epochs * cfg.mini_batches_per_step

    # -- rollout + reward ------------------------------------------------------------------------------------
    def rollout(self, prompts: list[Prompt], timer: StepTimer) -> list[Rollout]:
        """n rollouts per prompt: online slots first, then the hybrid plan decides the last k slots."""
        from evr1_train.hybrid import offline_slots, plan_group

        n = self.cfg.n
        k_slots = set(offline_slots(n, self.hybrid)) if self.hybrid.enable else set()
        groups: list[list[Rollout | None]] = [[None] * n for _ in prompts]
        first = [(p, s) for p in range(len(prompts)) for s in range(n) if not (prompts[p].offline_ids and s in k_slots)]
        self._sample_into(groups, prompts, first, timer)
        second: list[tuple[int, int]] = []
        for p, prompt in enumerate(prompts):
            if not prompt.offline_ids:
                continue
            online_acc = [g.accuracy for g in groups[p] if g is not None]
            plan = plan_group(self.hybrid, n, True, online_acc)
            for s in sorted(k_slots):
                if plan[s]:
                    groups[p][s] = self._offline_rollout(p, prompt)
                else:
                    second.append((p, s))
        self._sample_into(groups, prompts, second, timer)
        with timer.phase("reward"):
            for p, g in enumerate(groups):
                for seq in g:
                    if seq is not None and seq.offline:
                        self._score(prompts[p], seq)  # rewards are recomputed for stored responses, as verl does
        return [seq for g in groups for seq in g if seq is not None]

    def _offline_rollout(self, p: int, prompt: Prompt) -> Rollout:
        """The stored trajectory of prompt `p` as a rollout (scored with the others below)."""
        return Rollout(p, list(prompt.offline_ids or ()), True)

    def _sample_into(
        self, groups: list[list[Rollout | None]], prompts: list[Prompt], slots: list[tuple[int, int]], timer: StepTimer
    ) -> None:
        """Sample and score one response for each (prompt, slot)."""
        if not slots:
            return
        with timer.phase("rollout"):
            seqs = self._sample([prompts[p] for p, _ in slots], [p for p, _ in slots])
        with timer.phase("reward"):
            for (p, s), seq in zip(slots, seqs, strict=True):
                self._score(prompts[p], seq)
                groups[p][s] = seq

    # -- log-probs ---------------------------------------------------------------------------------------------
    def _micro_batches(self, idx: Sequence[int]) -> list[list[int]]:
        m = self.cfg.micro_batch_size
        return [list(idx[i : i + m]) for i in range(0, len(idx), m)]

    def _forward_inputs(self, prompts: list[Prompt], seqs: list[Rollout], mb: Sequence[int]) -> dict[str, Any]:
        """What `token_logprobs` needs for the rollouts `mb`: their prompts (with every vision tensor the sequence
        holds) and response ids (multi-turn episodes override this: tools' frames join the prompt's)."""
        return {"prompts": [prompts[seqs[i].prompt].encoded for i in mb], "responses": [seqs[i].response for i in mb]}

    def _response_mask(self, seqs: list[Rollout], width: int) -> torch.Tensor:
        """`[B, R]` 1 on the response tokens the loss trains on (every generated one; tools' tokens are 0)."""
        from evr1_train.engine.batch import pad_responses

        _, mask = pad_responses([s.response for s in seqs], self.pad_id, width)
        return mask.float().to(self.runtime.device)

    def _token_logprobs(
        self, model: Any, prompts: list[Prompt], seqs: list[Rollout], mb: Sequence[int], width: int, entropy: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """log pi `[len(mb), width]` of the rollouts `mb` under `model`, and their entropy when asked."""
        lp, ent, _ = token_logprobs(
            model,
            **self._forward_inputs(prompts, seqs, mb),
            pad_id=self.pad_id,
            temperature=self.cfg.temperature,
            runtime=self.runtime,
            with_entropy=entropy,
            width=width,
        )
        return lp, ent

    def _logprobs(self, model: Any, prompts: list[Prompt], seqs: list[Rollout], width: int) -> torch.Tensor:
        with torch.no_grad():
            mbs = self._micro_batches(range(len(seqs)))
            return torch.cat([self._token_logprobs(model, prompts, seqs, mb, width, False)[0] for mb in mbs], dim=0)

    def _old_and_ref_logprobs(
        self, prompts: list[Prompt], seqs: list[Rollout], width: int, timer: StepTimer
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """pi_old (None when one optimiser step per batch makes it equal pi_theta) and the reference log-probs."""
        cfg = self.cfg
        reuse_old = cfg.ppo_epochs * cfg.mini_batches_per_step == 1 and not cfg.use_kl_in_reward
        old_lp = ref_lp = None
        with timer.phase("log_prob"):
            if not reuse_old:
                old_lp = self._logprobs(self.model, prompts, seqs, width)
            if self.ref_model is not None:
                ref_lp = self._logprobs(self.ref_model, prompts, seqs, width)
            elif self.ref_in_actor:  # LoRA: the base model = the actor with its adapter disabled
                was_training = self.model.training
                self.model.eval()  # dropout, if any, is off as in a separate reference model
                try:
                    with self.model.disable_adapter():
                        ref_lp = self._logprobs(self.model, prompts, seqs, width)
                finally:
                    self.model.train(was_training)
        return old_lp, ref_lp

    # -- one step ----------------------------------------------------------------------------------------------
    def step(self) -> dict[str, float]:
        """One RL iteration; returns its metrics (rewards, accuracy, losses, phase times, hybrid counts)."""
        timer = StepTimer()
        t0 = time.perf_counter()
        self._offline_notes = defaultdict(int)
        step = self.state.step + 1
        self.model.train()
        prompts, seqs, metrics = self._collect(step, timer)
        width = max(1, max(len(s.response) for s in seqs))
        resp_mask = self._response_mask(seqs, width)
        old_lp, ref_lp = self._old_and_ref_logprobs(prompts, seqs, width, timer)
        with timer.phase("advantage"):
            adv = self._advantages(prompts, seqs, resp_mask, old_lp, ref_lp, metrics, timer)
        if self.on_rollout is not None:
            self.on_rollout(step, prompts, seqs, adv, resp_mask)
        offline = torch.tensor([s.offline for s in seqs], dtype=torch.bool, device=self.runtime.device)
        with timer.phase("update"):
            metrics.update(self._update(prompts, seqs, width, resp_mask, adv, old_lp, ref_lp, offline))
        self.state.step = step
        elapsed = time.perf_counter() - t0
        self.state.wall_s += elapsed
        metrics.update(self._step_metrics(seqs, resp_mask, adv, elapsed, timer))
        return {k: float(v) for k, v in metrics.items()}

    def _advantages(
        self,
        prompts: list[Prompt],
        seqs: list[Rollout],
        resp_mask: torch.Tensor,
        old_lp: torch.Tensor | None,
        ref_lp: torch.Tensor | None,
        metrics: dict[str, float],
        timer: StepTimer,
    ) -> torch.Tensor:
        """Token advantages `[B, R]` from verl's estimator (KL-in-reward and ReMax baselines included)."""
        cfg = self.cfg
        scores = [s.overall for s in seqs]
        rewards = algorithms.outcome_rewards(scores, resp_mask)
        if cfg.use_kl_in_reward:
            if old_lp is None or ref_lp is None:
                raise RuntimeError("algorithm.use_kl_in_reward needs old and reference log-probs (engine bug)")
            rewards, seq_kl = algorithms.kl_in_reward(
                rewards, old_lp, ref_lp, resp_mask, self.state.kl_coef, cfg.kl_penalty
            )
            metrics["actor/reward_kl_penalty"] = seq_kl
            metrics["actor/reward_kl_penalty_coeff"] = self.state.kl_coef
        baselines = self._greedy_baselines(prompts, seqs, timer) if cfg.adv_estimator == "remax" else None
        components = {"accuracy": [s.accuracy for s in seqs], "format": [s.format for s in seqs], "overall": scores}
        return algorithms.compute_advantages(
            cfg,
            rewards,
            resp_mask,
            [prompts[s.prompt].uid for s in seqs],
            reward_baselines=baselines,
            components=components,
            prompt_width=max(p.encoded.length for p in prompts),
        )

    def _step_metrics(
        self, seqs: list[Rollout], resp_mask: torch.Tensor, adv: torch.Tensor, elapsed: float, timer: StepTimer
    ) -> dict[str, float]:
        """Reward, accuracy, length, LR, data, timing and hybrid metrics of the finished step (verl's names)."""
        from evr1_train.hybrid import hybrid_metrics

        scores = [s.overall for s in seqs]
        online = [s for s in seqs if not s.offline]
        n_tok = resp_mask.sum(-1)
        out = {
            "step": float(self.state.step),
            "epoch": float(self.state.epoch),
            "critic/score/mean": mean(scores),
            "critic/accuracy/mean": mean([s.accuracy for s in online]),
            "critic/format/mean": mean([s.format for s in online]),
            "critic/advantages/mean": float((adv * resp_mask).sum() / resp_mask.sum().clamp_min(1)),
            "response_length/mean": float(n_tok.mean()),
            "actor/lr": float(self.scheduler.get_last_lr()[0]),
            "data/skipped_rows": float(self.state.skipped_rows),
            "hybrid/offline_truncated": float(self._offline_notes.get("truncated", 0)),
            "hybrid/offline_skipped": float(self._offline_notes.get("skipped", 0)),
            "timing_s/step": elapsed,
        }
        out.update({f"timing_s/{k}": v for k, v in timer.times.items()})
        if self.cfg.overlong_buffer_len:
            penalties = [s.overlong_penalty for s in seqs]
            out["reward/overlong_penalty/mean"] = mean(penalties)
            out["reward/overlong_frac"] = mean([float(p < 0) for p in penalties])
        hybrid = hybrid_metrics(
            [s.offline for s in seqs], scores, [s.accuracy for s in seqs], n_tok.tolist(), prefix="hybrid"
        )
        out.update(hybrid)
        return out

    def _collect(self, step: int, timer: StepTimer) -> tuple[list[Prompt], list[Rollout], dict[str, float]]:
        """Rollouts of one batch; with DAPO dynamic sampling (`algorithm.filter_groups`), groups whose metric is the
        same for every rollout carry no signal and are dropped, drawing more batches until the batch is full."""
        metric = self.cfg.filter_groups_metric
        if metric is None:
            prompts = self._prepare_batch(step, timer)
            return prompts, self.rollout(prompts, timer), {}
        key = {"score": "overall", "overall": "overall", "acc": "accuracy", "accuracy": "accuracy", "format": "format"}
        if metric not in key:
            raise ValueError(
                f"algorithm.filter_groups.metric={metric!r} is not a reward component; use one of {sorted(key)}"
            )
        kept_p: list[Prompt] = []
        kept_s: list[Rollout] = []
        drawn = dropped = 0
        while len(kept_p) < self.cfg.train_batch_size and drawn < self.cfg.filter_groups_max_batches:
            prompts = self._prepare_batch(step, timer)
            seqs = self.rollout(prompts, timer)
            drawn += 1
            for p, prompt in enumerate(prompts):
                group = [s for s in seqs if s.prompt == p]
                if len({getattr(s, key[metric]) for s in group}) <= 1:
                    dropped += 1
                    continue
                if len(kept_p) >= self.cfg.train_batch_size:
                    break
                new = len(kept_p)
                kept_p.append(prompt)
                kept_s += [dataclasses.replace(s, prompt=new) for s in group]
        if not kept_p:  # nothing informative in any batch: train on the last one (advantages are all zero)
            kept_p, kept_s = prompts, seqs
        return (
            kept_p,
            kept_s,
            {"filter_groups/batches_drawn": float(drawn), "filter_groups/groups_dropped": float(dropped)},
        )

    def _greedy_baselines(self, prompts: list[Prompt], seqs: list[Rollout], timer: StepTimer) -> torch.Tensor:
        """ReMax: the reward of one greedy rollout per prompt is every sample's baseline."""
        with timer.phase("rollout"):
            base = [seq.overall for seq in self._answer(prompts, do_sample=False)]
        return torch.tensor([base[s.prompt] for s in seqs], dtype=torch.float32, device=self.runtime.device)

    def _update(
        self,
        prompts: list[Prompt],
        seqs: list[Rollout],
        width: int,
        resp_mask: torch.Tensor,
        adv: torch.Tensor,
        old_lp: torch.Tensor | None,
        ref_lp: torch.Tensor | None,
        offline: torch.Tensor,
    ) -> dict[str, float]:
        """PPO epochs x mini-batches (each one optimiser step, verl semantics), micro-batch gradient accumulation."""
        cfg = self.cfg
        per_mini = cfg.ppo_mini_batch_size * cfg.n  # sequences per optimiser step, as verl scales it by n
        sums: dict[str, list[float]] = defaultdict(list)
        for _epoch in range(cfg.ppo_epochs):
            for start in range(0, len(seqs), per_mini):
                mini = list(range(start, min(start + per_mini, len(seqs))))
                n_tokens = int(resp_mask[mini].sum().item())
                n_seqs = int((resp_mask[mini].sum(-1) > 0).sum().item())
                self.optimizer.zero_grad(set_to_none=True)
                for mb in self._micro_batches(mini):
                    lp, ent = self._token_logprobs(self.model, prompts, seqs, mb, width, bool(cfg.entropy_coeff))
                    loss, m = algorithms.policy_loss(
                        cfg,
                        self.actor_cfg,
                        old_log_prob=lp.detach() if old_lp is None else old_lp[mb],
                        log_prob=lp,
                        advantages=adv[mb],
                        response_mask=resp_mask[mb],
                        entropy=ent,
                        ref_log_prob=None if ref_lp is None else ref_lp[mb],
                        offline_mask=offline[mb],
                        hybrid=self.hybrid,
                        batch_num_tokens=max(1, n_tokens),
                        global_batch_size=max(1, n_seqs),
                    )
                    (loss + self._vision_zero_term([prompts[seqs[i].prompt] for i in mb])).backward()
                    for k, v in m.items():
                        sums[k].append(v)
                sums["actor/grad_norm"].append(self._optimizer_step())
        return {k: mean(v) for k, v in sums.items()}
