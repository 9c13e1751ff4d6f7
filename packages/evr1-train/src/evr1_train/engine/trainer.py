"""`LocalTrainer`: one RL step at a time, in one process — rollout, reward, advantage, PPO update, validation.

Why a class with an explicit `step()`: tests drive it step by step (resume reproduces the next step; every estimator
runs one step), benchmarks time its phases, and `run()` wraps it with logging and checkpoints. It reuses the verl
path's pieces: rows -> prompts/pixels (`evr1_train.data`), hybrid planning (`evr1_train.hybrid`), rewards
(`evr1_rewards`), advantages and losses (verl's `core_algos`, via `engine.algorithms`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import random
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from evr1_train.data.row import check_model_family
from evr1_train.engine import algorithms
from evr1_train.engine.batch import EncodedPrompt, encode_prompt
from evr1_train.engine.config import LocalConfig
from evr1_train.engine.policy import (
    Runtime,
    eos_ids,
    generate,
    load_policy,
    pick_runtime,
    token_logprobs,
    vision_token_ids,
)
from evr1_train.engine.rows import epoch_order, read_all, row_id

logger = logging.getLogger(__name__)


@dataclass
class Prompt:
    """One dataset row prepared for this step."""

    uid: str
    row_id: str
    kind: str
    encoded: EncodedPrompt
    ground_truth: Any
    problem_type: str
    extras: dict[str, Any]
    offline_ids: tuple[int, ...] | None = None
    row: dict[str, Any] | None = None  # the dataset row (rollout dumps rebuild its media references from it)


@dataclass
class Sequence_:
    """One rollout of a prompt."""

    prompt: int
    response: list[int]
    offline: bool
    text: str = ""
    overall: float = 0.0
    accuracy: float = 0.0
    format: float = 0.0
    overlong_penalty: float = 0.0


@dataclass
class TrainState:
    """Everything besides weights and optimiser moments that a resumed run needs (JSON-serialisable)."""

    step: int = 0
    epoch: int = 0
    position: int = 0
    kl_coef: float = 0.0
    wall_s: float = 0.0
    history: list[dict[str, float]] = field(default_factory=list)  # validation results per step
    skipped_rows: int = 0


class StepTimer:
    """Wall time per phase of a step (data, rollout, reward, log_prob, update)."""

    def __init__(self) -> None:
        self.times: dict[str, float] = defaultdict(float)

    def phase(self, name: str) -> _Phase:
        return _Phase(self, name)


class _Phase:
    def __init__(self, timer: StepTimer, name: str) -> None:
        self.timer, self.name = timer, name

    def __enter__(self) -> None:
        self.t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.timer.times[self.name] += time.perf_counter() - self.t0


class LocalTrainer:
    """Holds model, optimiser, data order and reward router; `step()` performs one RL iteration."""

    def __init__(self, cfg: LocalConfig, *, ref_path: str | None = None) -> None:
        from evr1_rewards import RewardRouter
        from evr1_train.data import DataOptions
        from evr1_train.hybrid import HybridConfig

        self.cfg = cfg
        if cfg.num_threads > 0:
            torch.set_num_threads(cfg.num_threads)
        self.runtime: Runtime = pick_runtime(cfg.device, cfg.dtype)
        base_dir = os.path.dirname(os.path.abspath(cfg.train_files[0]))
        self.data_opts = DataOptions.from_mapping(algorithms.plain(cfg.data_evr1_node), base_dir=base_dir)
        hybrid = HybridConfig.from_mapping(algorithms.plain(cfg.hybrid_node))
        if hybrid.enable and "base_loss_mode" in {f.name for f in dataclasses.fields(hybrid)}:
            hybrid = dataclasses.replace(hybrid, base_loss_mode=cfg.loss_mode)
        hybrid.check_group_size(cfg.n)
        self.hybrid = hybrid
        self.router = RewardRouter(dict(cfg.reward_weights), think=cfg.reward_think)  # type: ignore[arg-type]
        self.train_rows = self._usable(read_all(cfg.train_files), "train")
        self.val_rows = self._usable(read_all(cfg.val_files), "validation") if cfg.val_files else []
        if len(self.train_rows) < cfg.train_batch_size:
            raise ValueError(
                f"only {len(self.train_rows)} usable training rows for data.train_batch_size={cfg.train_batch_size}; "
                "lower the batch size or add data"
            )
        self.model, self.processor = load_policy(cfg.model_path, self.runtime)
        self.tokenizer = self.processor.tokenizer
        self.pad_id = int(self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0)
        self.eos = eos_ids(self.model, self.tokenizer)
        self.family = check_model_family(self.data_opts, self.processor, cfg.model_path)
        self.train_rows = self._fit_prompt_length(self.train_rows, "train")
        self.val_rows = self._fit_prompt_length(self.val_rows, "validation")
        self.vision_ids = vision_token_ids(self.tokenizer, self.family)
        self.ref_model = None
        if cfg.use_kl_loss or cfg.use_kl_in_reward:
            self.ref_model, _ = load_policy(ref_path or cfg.model_path, self.runtime)
            self.ref_model.eval().requires_grad_(False)
        self.model.train()
        self.optimizer = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad],
            lr=cfg.lr,
            betas=cfg.betas,
            weight_decay=cfg.weight_decay,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.actor_cfg = algorithms.actor_config(cfg)
        self.state = TrainState(kl_coef=cfg.kl_ctrl_coef)
        self._val_cache: dict[str, EncodedPrompt] = {}
        self._offline_notes: dict[str, int] = defaultdict(int)
        #: Called as on_rollout(step, prompts, seqs, advantages, response_mask) each step (rollout dumps).
        self.on_rollout: Callable[..., None] | None = None
        torch.manual_seed(cfg.seed)
        random.seed(cfg.seed)

    # -- data ------------------------------------------------------------------------------------------------
    def _fit_prompt_length(self, rows: list[dict[str, Any]], split: str) -> list[dict[str, Any]]:
        """Rows over data.max_prompt_length: refused or filtered before step one (evr1.plan.on_over_limit)."""
        from evr1_train.data.plan_check import check_prompt_lengths

        limit, mode = self.cfg.max_prompt_length, self.data_opts.on_over_limit
        keep = check_prompt_lengths(rows, self.data_opts, self.processor, self.family, limit, mode, split)
        return [rows[i] for i in keep]

    def _lr_factor(self, step: int) -> float:
        """verl's schedules: linear warm-up, then constant or a half-cosine down to `min_lr_ratio` (per optimiser step)."""
        cfg = self.cfg
        w = cfg.warmup_steps
        if w > 0 and step < w:
            return (step + 1) / w
        if cfg.lr_scheduler == "constant":
            return 1.0
        total = max(1, cfg.total_steps * cfg.ppo_epochs * cfg.mini_batches_per_step - w)
        progress = min(1.0, (step - w) / total)
        return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    def _usable(self, rows: list[dict[str, Any]], split: str) -> list[dict[str, Any]]:
        """Drop rows whose prompt cannot be built, whose media file is missing, or whose answer cannot be scored.

        One warning lists the first few reasons; the run continues with the rest (a bad row never kills a run).
        """
        from evr1_rewards import RewardInput
        from evr1_train.data import ground_truth_of, row_extra_info, row_messages
        from evr1_train.data.row import media_items

        good, bad = [], []
        for i, row in enumerate(rows):
            rid = row_id(row, i)
            try:
                msgs = row_messages(row, self.data_opts)
                for item in media_items(msgs):
                    ref = item.get(item["type"])
                    if isinstance(ref, str) and not os.path.exists(ref) and self.data_opts.video_source != "cache_only":
                        raise FileNotFoundError(f"{item['type']} file not found: {ref}")
                extra = row_extra_info(row, self.data_opts, i)
                self.router.score(
                    RewardInput(
                        response="",
                        ground_truth=ground_truth_of(row, self.data_opts),
                        problem_type=extra["problem_type"],
                        extras=extra,
                        sample_id=rid,
                    )
                )
            except Exception as exc:
                bad.append(f"{rid}: {type(exc).__name__}: {exc}")
                continue
            good.append(row)
        if bad:
            logger.warning(
                "%s data: skipped %d of %d rows that cannot be used (fix them and rerun to include them); first: %s",
                split,
                len(bad),
                len(rows),
                " | ".join(bad[:3]),
            )
        return good

    def _next_rows(self) -> list[tuple[int, dict[str, Any]]]:
        st, n, bs = self.state, len(self.train_rows), self.cfg.train_batch_size
        if st.position + bs > n:  # drop the incomplete tail, like verl's dataloader (drop_last)
            st.epoch += 1
            st.position = 0
        order = epoch_order(n, self.cfg.seed, st.epoch, self.cfg.shuffle)
        idx = order[st.position : st.position + bs]
        st.position += bs
        return [(i, self.train_rows[i]) for i in idx]

    def _prepare(self, index: int, row: dict[str, Any], uid: str, cache: dict[str, EncodedPrompt] | None) -> Prompt:
        from evr1_train.data import ground_truth_of, row_extra_info, row_to_inputs
        from evr1_train.hybrid import fit_offline_response, row_offline_text

        rid = row_id(row, index)
        enc = cache.get(rid) if cache is not None else None
        if enc is None:
            inputs = row_to_inputs(row, self.data_opts, index, None)
            enc = encode_prompt(self.processor, inputs.messages, inputs.images, inputs.videos, self.family)
            if cache is not None:
                cache[rid] = enc
            gt, extras = inputs.ground_truth, dict(inputs.extra_info)
        else:  # validation prompts are encoded once; only the cheap reward inputs are rebuilt
            gt, extras = ground_truth_of(row, self.data_opts), row_extra_info(row, self.data_opts, index)
        offline = None
        text = row_offline_text(row, self.hybrid) if self.hybrid.enable else None
        if text:
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            fitted = fit_offline_response(ids, self.cfg.max_response_length, self.eos[0], self.hybrid)
            if set(ids) & set(self.vision_ids):
                fitted = dataclasses.replace(
                    fitted, token_ids=(), skipped=True, reason="stored trajectory contains vision placeholder tokens"
                )
            if fitted.skipped or fitted.truncated:
                logger.info("row %s: %s", rid, fitted.reason)
                self._offline_notes[("skipped" if fitted.skipped else "truncated")] += 1
            if not fitted.skipped:
                offline = fitted.token_ids
        kind = str(row.get("kind") or row.get("data_source") or extras["problem_type"])
        return Prompt(uid, rid, kind, enc, gt, extras["problem_type"], extras, offline, row=row)

    # -- rollout + reward ------------------------------------------------------------------------------------
    def _generate(self, prompts: Sequence[EncodedPrompt], do_sample: bool = True) -> list[list[int]]:
        return generate(
            self.model,
            prompts,
            pad_id=self.pad_id,
            eos=self.eos,
            max_new_tokens=self.cfg.max_response_length,
            do_sample=do_sample,
            temperature=self.cfg.temperature,
            top_p=self.cfg.top_p,
            top_k=self.cfg.top_k,
            runtime=self.runtime,
            suppress=self.vision_ids,
        )

    def _score(self, prompt: Prompt, seq: Sequence_) -> None:
        from evr1_rewards import RewardInput

        seq.text = self.tokenizer.decode(seq.response, skip_special_tokens=True)
        res = self.router.score(
            RewardInput(
                response=seq.text,
                ground_truth=prompt.ground_truth,
                problem_type=prompt.problem_type,
                extras=prompt.extras,
                sample_id=prompt.row_id,
            )
        )
        seq.overall, seq.accuracy, seq.format = res.overall, res.accuracy, res.format
        if self.cfg.overlong_buffer_len:
            seq.overlong_penalty = algorithms.overlong_penalty(
                len(seq.response),
                self.cfg.overlong_max_resp_len,
                self.cfg.overlong_buffer_len,
                self.cfg.overlong_penalty_factor,
            )
            seq.overall += seq.overlong_penalty

    def rollout(self, prompts: list[Prompt], timer: StepTimer) -> list[Sequence_]:
        """n rollouts per prompt: online slots first, then the hybrid plan decides the last k slots."""
        from evr1_train.hybrid import offline_slots, plan_group

        n = self.cfg.n
        k_slots = set(offline_slots(n, self.hybrid)) if self.hybrid.enable else set()
        groups: list[list[Sequence_ | None]] = [[None] * n for _ in prompts]
        first = [(p, s) for p in range(len(prompts)) for s in range(n) if not (prompts[p].offline_ids and s in k_slots)]
        with timer.phase("rollout"):
            outs = self._generate([prompts[p].encoded for p, _ in first])
        with timer.phase("reward"):
            for (p, s), resp in zip(first, outs, strict=True):
                seq = Sequence_(p, resp, False)
                self._score(prompts[p], seq)
                groups[p][s] = seq
        second: list[tuple[int, int]] = []
        for p, prompt in enumerate(prompts):
            if not prompt.offline_ids:
                continue
            online_acc = [g.accuracy for g in groups[p] if g is not None]
            plan = plan_group(self.hybrid, n, True, online_acc)
            for s in sorted(k_slots):
                if plan[s]:
                    groups[p][s] = Sequence_(p, list(prompt.offline_ids), True)
                else:
                    second.append((p, s))
        if second:
            with timer.phase("rollout"):
                outs = self._generate([prompts[p].encoded for p, _ in second])
            for (p, s), resp in zip(second, outs, strict=True):
                groups[p][s] = Sequence_(p, resp, False)
        with timer.phase("reward"):
            for p, s in second:
                self._score(prompts[p], groups[p][s])  # type: ignore[arg-type]
            for p, g in enumerate(groups):
                for seq in g:
                    if seq is not None and seq.offline:
                        self._score(prompts[p], seq)  # rewards are recomputed for stored responses, as verl does
        return [seq for g in groups for seq in g if seq is not None]

    # -- log-probs ---------------------------------------------------------------------------------------------
    def _micro_batches(self, idx: Sequence[int]) -> list[list[int]]:
        m = self.cfg.micro_batch_size
        return [list(idx[i : i + m]) for i in range(0, len(idx), m)]

    def _logprobs(self, model: Any, prompts: list[Prompt], seqs: list[Sequence_], width: int) -> torch.Tensor:
        parts = []
        with torch.no_grad():
            for mb in self._micro_batches(range(len(seqs))):
                lp, _, _ = token_logprobs(
                    model,
                    [prompts[seqs[i].prompt].encoded for i in mb],
                    [seqs[i].response for i in mb],
                    pad_id=self.pad_id,
                    temperature=self.cfg.temperature,
                    runtime=self.runtime,
                    width=width,
                )
                parts.append(lp)
        return torch.cat(parts, dim=0)

    # -- one step ----------------------------------------------------------------------------------------------
    def step(self) -> dict[str, float]:
        """One RL iteration; returns its metrics (rewards, accuracy, losses, phase times, hybrid counts)."""
        from evr1_train.engine.batch import pad_responses
        from evr1_train.hybrid import hybrid_metrics

        cfg, timer = self.cfg, StepTimer()
        t0 = time.perf_counter()
        self._offline_notes = defaultdict(int)
        step = self.state.step + 1
        self.model.train()
        prompts, seqs, filter_metrics = self._collect(step, timer)
        width = max(1, max(len(s.response) for s in seqs))
        _, resp_mask = pad_responses([s.response for s in seqs], self.pad_id, width)
        resp_mask = resp_mask.float().to(self.runtime.device)
        uids = [prompts[s.prompt].uid for s in seqs]
        offline = torch.tensor([s.offline for s in seqs], dtype=torch.bool, device=self.runtime.device)
        updates = cfg.ppo_epochs * cfg.mini_batches_per_step
        reuse_old = updates == 1 and not cfg.use_kl_in_reward  # one optimiser step: pi_old == pi_theta, reuse it
        old_lp = ref_lp = None
        with timer.phase("log_prob"):
            if not reuse_old:
                old_lp = self._logprobs(self.model, prompts, seqs, width)
            if self.ref_model is not None:
                ref_lp = self._logprobs(self.ref_model, prompts, seqs, width)
        metrics: dict[str, float] = dict(filter_metrics)
        with timer.phase("advantage"):
            scores = [s.overall for s in seqs]
            rewards = algorithms.outcome_rewards(scores, resp_mask)
            if cfg.use_kl_in_reward:
                assert old_lp is not None
                assert ref_lp is not None
                rewards, seq_kl = algorithms.kl_in_reward(
                    rewards, old_lp, ref_lp, resp_mask, self.state.kl_coef, cfg.kl_penalty
                )
                metrics["actor/reward_kl_penalty"] = seq_kl
                metrics["actor/reward_kl_penalty_coeff"] = self.state.kl_coef
            baselines = None
            if cfg.adv_estimator == "remax":
                baselines = self._greedy_baselines(prompts, seqs, timer)
            components = {
                "accuracy": [s.accuracy for s in seqs],
                "format": [s.format for s in seqs],
                "overall": scores,
            }
            prompt_width = max(p.encoded.length for p in prompts)
            adv = algorithms.compute_advantages(
                cfg,
                rewards,
                resp_mask,
                uids,
                reward_baselines=baselines,
                components=components,
                prompt_width=prompt_width,
            )
        if self.on_rollout is not None:
            self.on_rollout(step, prompts, seqs, adv, resp_mask)
        with timer.phase("update"):
            metrics.update(self._update(prompts, seqs, width, resp_mask, adv, old_lp, ref_lp, offline))
        self.state.step = step
        elapsed = time.perf_counter() - t0
        self.state.wall_s += elapsed
        n_tok = resp_mask.sum(-1)
        metrics.update(
            {
                "step": float(step),
                "epoch": float(self.state.epoch),
                "critic/score/mean": _mean(scores),
                "critic/accuracy/mean": _mean([s.accuracy for s in seqs if not s.offline]),
                "critic/format/mean": _mean([s.format for s in seqs if not s.offline]),
                "critic/advantages/mean": float((adv * resp_mask).sum() / resp_mask.sum().clamp_min(1)),
                "response_length/mean": float(n_tok.mean()),
                "actor/lr": float(self.scheduler.get_last_lr()[0]),
                "data/skipped_rows": float(self.state.skipped_rows),
                "hybrid/offline_truncated": float(self._offline_notes.get("truncated", 0)),
                "hybrid/offline_skipped": float(self._offline_notes.get("skipped", 0)),
                "timing_s/step": elapsed,
            }
        )
        metrics.update({f"timing_s/{k}": v for k, v in timer.times.items()})
        if self.cfg.overlong_buffer_len:
            penalties = [s.overlong_penalty for s in seqs]
            metrics["reward/overlong_penalty/mean"] = _mean(penalties)
            metrics["reward/overlong_frac"] = _mean([float(p < 0) for p in penalties])
        metrics.update(
            hybrid_metrics(
                [s.offline for s in seqs], scores, [s.accuracy for s in seqs], n_tok.tolist(), prefix="hybrid"
            )
        )
        return {k: float(v) for k, v in metrics.items() if v is not None}

    def _prepare_batch(self, step: int, timer: StepTimer) -> list[Prompt]:
        with timer.phase("data"):
            prompts: list[Prompt] = []
            for index, row in self._next_rows():
                try:
                    prompts.append(self._prepare(index, row, f"{step}-{row_id(row, index)}", None))
                except Exception as exc:  # a row that fails now (e.g. media vanished): skip it, keep training
                    self.state.skipped_rows += 1
                    logger.warning("step %d: skipped row %s: %s: %s", step, row_id(row, index), type(exc).__name__, exc)
        if not prompts:
            raise RuntimeError(f"step {step}: every row of the batch failed to load; see the warnings above")
        return prompts

    def _collect(self, step: int, timer: StepTimer) -> tuple[list[Prompt], list[Sequence_], dict[str, float]]:
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
        kept_s: list[Sequence_] = []
        drawn = dropped = 0
        while len(kept_p) < self.cfg.train_batch_size and drawn < self.cfg.filter_groups_max_batches:
            prompts = self._prepare_batch(step, timer)
            seqs = self.rollout(prompts, timer)
            drawn += 1
            for p, prompt in enumerate(prompts):
                group = [s for s in seqs if s.prompt == p]
                values = {getattr(s, key[metric]) for s in group}
                if len(values) <= 1:
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

    def _greedy_baselines(self, prompts: list[Prompt], seqs: list[Sequence_], timer: StepTimer) -> torch.Tensor:
        """ReMax: the reward of one greedy rollout per prompt is every sample's baseline."""
        with timer.phase("rollout"):
            outs = self._generate([p.encoded for p in prompts], do_sample=False)
        base = []
        for p, resp in enumerate(outs):
            seq = Sequence_(p, resp, False)
            self._score(prompts[p], seq)
            base.append(seq.overall)
        return torch.tensor([base[s.prompt] for s in seqs], dtype=torch.float32, device=self.runtime.device)

    def _update(
        self,
        prompts: list[Prompt],
        seqs: list[Sequence_],
        width: int,
        resp_mask: torch.Tensor,
        adv: torch.Tensor,
        old_lp: torch.Tensor | None,
        ref_lp: torch.Tensor | None,
        offline: torch.Tensor,
    ) -> dict[str, float]:
        """PPO epochs x mini-batches (each one optimiser step, verl semantics), micro-batch gradient accumulation."""
        from evr1_train.losses import vision_zero_term

        cfg = self.cfg
        per_mini = cfg.ppo_mini_batch_size * cfg.n  # sequences per optimiser step, as verl scales it by n
        order = list(range(len(seqs)))
        sums: dict[str, list[float]] = defaultdict(list)
        with_entropy = bool(cfg.entropy_coeff)
        for _epoch in range(cfg.ppo_epochs):
            for start in range(0, len(order), per_mini):
                mini = order[start : start + per_mini]
                n_tokens = int(resp_mask[mini].sum().item())
                n_seqs = int((resp_mask[mini].sum(-1) > 0).sum().item())
                self.optimizer.zero_grad(set_to_none=True)
                for mb in self._micro_batches(mini):
                    lp, ent, _ = token_logprobs(
                        self.model,
                        [prompts[seqs[i].prompt].encoded for i in mb],
                        [seqs[i].response for i in mb],
                        pad_id=self.pad_id,
                        temperature=cfg.temperature,
                        runtime=self.runtime,
                        with_entropy=with_entropy,
                        width=width,
                    )
                    old = lp.detach() if old_lp is None else old_lp[mb]
                    loss, m = algorithms.policy_loss(
                        cfg,
                        self.actor_cfg,
                        old_log_prob=old,
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
                    if not any(
                        k in prompts[seqs[i].prompt].encoded.vision
                        for i in mb
                        for k in ("pixel_values", "pixel_values_videos")
                    ):
                        loss = loss + vision_zero_term(
                            self.model, "image"
                        )  # text-only micro-batch: tower still in graph
                    loss.backward()
                    for k, v in m.items():
                        sums[k].append(v)
                grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
                if torch.isfinite(grad_norm):
                    self.optimizer.step()
                else:
                    logger.warning("non-finite gradient norm (%s); optimiser step skipped", float(grad_norm))
                self.scheduler.step()
                sums["actor/grad_norm"].append(float(grad_norm))
        return {k: _mean(v) for k, v in sums.items()}

    # -- validation --------------------------------------------------------------------------------------------
    def validate(self, limit: int | None = None) -> dict[str, float]:
        """Greedy (or sampled, per `rollout.val_kwargs.do_sample`) answers on the held-out rows; accuracy per kind."""
        rows = self.val_rows[:limit] if limit else self.val_rows
        if not rows:
            return {}
        t0 = time.perf_counter()
        per_kind: dict[str, list[float]] = defaultdict(list)
        accs, overall, fmts, lengths = [], [], [], []
        state = torch.random.get_rng_state()  # validation must not shift the training sample stream
        try:
            for start in range(0, len(rows), self.cfg.val_batch_size):
                chunk = rows[start : start + self.cfg.val_batch_size]
                prompts = [
                    self._prepare(start + j, r, f"val-{start + j}", self._val_cache) for j, r in enumerate(chunk)
                ]
                outs = self._generate([p.encoded for p in prompts], do_sample=self.cfg.val_do_sample)
                for p, (prompt, resp) in enumerate(zip(prompts, outs, strict=True)):
                    seq = Sequence_(p, resp, False)
                    self._score(prompt, seq)
                    accs.append(seq.accuracy)
                    overall.append(seq.overall)
                    fmts.append(seq.format)
                    lengths.append(len(resp))
                    per_kind[prompt.kind].append(seq.accuracy)
        finally:
            torch.random.set_rng_state(state)
        out = {
            "val/accuracy": _mean(accs),
            "val/reward": _mean(overall),
            "val/format": _mean(fmts),
            "val/response_length": _mean(lengths),
            "timing_s/validate": time.perf_counter() - t0,
        }
        out.update({f"val/accuracy/{k.split('/')[-1]}": _mean(v) for k, v in sorted(per_kind.items())})
        return out

    # -- checkpoints -------------------------------------------------------------------------------------------
    def save(self, folder: str | os.PathLike[str]) -> Path:
        from evr1_train.engine.checkpoint import save_checkpoint

        return save_checkpoint(self, Path(folder))

    def load(self, folder: str | os.PathLike[str]) -> None:
        from evr1_train.engine.checkpoint import load_checkpoint

        load_checkpoint(self, Path(folder))


def _mean(values: Sequence[float]) -> float:
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return sum(vals) / len(vals) if vals else float("nan")


ProgressFn = Callable[[int, dict[str, float]], None]
