"""What every local-engine trainer shares: model, optimiser and schedule, data order, prompts, rewards, validation and
the resumable state (`state_dict()` / `load_state_dict()`), so that the RL trainer (`trainer.LocalTrainer`) and the
supervised warm start (`sft.SFTTrainer`) differ only in their `step()`.

Names (stable): BaseTrainer, Prompt, Rollout, StepTimer
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import random
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from evr1_cache import read_rows, row_id
from evr1_train.data.row import check_model_family
from evr1_train.engine import algorithms
from evr1_train.engine.agent import ModelPolicy
from evr1_train.engine.batch import EncodedPrompt, encode_prompt
from evr1_train.engine.config import LocalConfig, plain
from evr1_train.engine.policy import Runtime, eos_ids, load_policy, pick_runtime, vision_token_ids
from evr1_train.engine.rows import check_row, epoch_order, usable_rows
from evr1_train.engine.state import TrainerState, TrainState, capture_rng, restore_rng
from evr1_train.hybrid.metrics import finite_mean as mean
from evr1_train.modules import freeze_modules, trainable_report

if TYPE_CHECKING:
    from evr1_rewards import RewardResult
    from evr1_train.engine.agent import Episode

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
class Rollout:
    """One response to a prompt (sampled, or a stored trajectory when `offline`) and its reward."""

    prompt: int
    response: list[int]
    offline: bool
    text: str = ""
    overall: float = 0.0
    accuracy: float = 0.0
    format: float = 0.0
    overlong_penalty: float = 0.0
    #: a multi-turn episode (`engine.agent`): its segments, tool calls and final answer; `response` is its tokens
    episode: Episode | None = None
    #: the episode's reward parts (`evr1_rewards.AgentReward.as_dict`), None for a single-turn rollout
    agent_reward: dict[str, float] | None = None


class StepTimer:
    """Wall time per phase of a step (data, rollout, reward, log_prob, advantage, update)."""

    def __init__(self) -> None:
        self.times: dict[str, float] = defaultdict(float)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.times[name] += time.perf_counter() - t0


class BaseTrainer:
    """Model, optimiser, schedule, rows and reward router of one local run; subclasses implement `step()`."""

    def __init__(self, cfg: LocalConfig) -> None:
        from evr1_rewards import RewardRouter
        from evr1_rewards.errors import one_of
        from evr1_rewards.router import THINK_POLICIES
        from evr1_train.data.options import DataOptions, data_folder
        from evr1_train.hybrid import HybridConfig

        self.cfg = cfg
        if cfg.num_threads > 0:
            torch.set_num_threads(cfg.num_threads)
        if cfg.return_freed_memory:
            from evr1_train.engine.memory import return_freed_memory

            return_freed_memory()
        self.runtime: Runtime = pick_runtime(cfg.device, cfg.dtype)
        self.data_opts = DataOptions.from_mapping(plain(cfg.data_evr1_node), base_dir=data_folder(cfg.train_files))
        hybrid = HybridConfig.from_mapping(plain(cfg.hybrid_node))
        if hybrid.enable:
            hybrid = dataclasses.replace(hybrid, base_loss_mode=cfg.loss_mode)
        hybrid.check_group_size(cfg.n)
        self.hybrid = hybrid
        think = one_of("engine.reward.think", cfg.reward_think, THINK_POLICIES)
        self.router = RewardRouter(dict(cfg.reward_weights), think=think)
        self.train_rows = self._usable(read_rows(*cfg.train_files), "train")
        self.val_rows = self._usable(read_rows(*cfg.val_files), "validation") if cfg.val_files else []
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
        if self.lora:
            from evr1_train.engine.lora import apply_lora

            self.model = apply_lora(self.model, cfg)
        # the frozen module patterns; the parameter counts are logged
        self.parameters_report = (
            freeze_modules(self.model, cfg.frozen_modules) if cfg.frozen_modules else trainable_report(self.model)
        )
        self.model.train()
        params = [p for p in self.model.parameters() if p.requires_grad]  # AdamW over the trainable parameters
        self.optimizer = torch.optim.AdamW(params, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.state = TrainState(kl_coef=cfg.kl_ctrl_coef)
        self._val_cache: dict[str, EncodedPrompt] = {}
        self._offline_notes: dict[str, int] = defaultdict(int)
        torch.manual_seed(cfg.seed)
        random.seed(cfg.seed)

    # -- trainable parameters ----------------------------------------------------------------------------------
    @property
    def lora(self) -> bool:
        return self.cfg.lora_rank > 0 or bool(self.cfg.lora_adapter_path)

    def parameters_line(self) -> str:
        """The start-up line about what trains: frozen / trainable counts, LoRA."""
        line = self.parameters_report.line()
        if self.lora:
            line += f"; LoRA r={self.cfg.lora_rank} alpha={self.cfg.lora_alpha} (only the adapter is saved)"
        return line

    # -- optimisation ----------------------------------------------------------------------------------------
    def _lr_factor(self, step: int) -> float:
        """verl's schedules: linear warm-up, then constant or a half-cosine down to `min_lr_ratio` (per optimiser step)."""
        cfg = self.cfg
        w = cfg.warmup_steps
        if w > 0 and step < w:
            return (step + 1) / w
        if cfg.lr_scheduler == "constant":
            return 1.0
        total = max(1, self._optimizer_steps_total() - w)
        progress = min(1.0, (step - w) / total)
        return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    def _optimizer_steps_total(self) -> int:
        return self.cfg.total_steps

    def _optimizer_step(self) -> float:
        """Clip, step (skipped on a non-finite gradient norm, with a warning) and advance the schedule; the norm."""
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        if torch.isfinite(grad_norm):
            self.optimizer.step()
        else:
            logger.warning("non-finite gradient norm (%s); optimiser step skipped", float(grad_norm))
        self.scheduler.step()
        return float(grad_norm)

    def _vision_zero_term(self, prompts: Sequence[Prompt]) -> torch.Tensor | float:
        """0 x the vision tower on a dummy input for a micro-batch without pixels, so the tower stays in the graph
        and its parameters get zero (not missing) gradients, as on the verl path (`losses.dummy_vision`)."""
        if any(k in p.encoded.vision for p in prompts for k in ("pixel_values", "pixel_values_videos")):
            return 0.0
        from evr1_train.losses import vision_zero_term

        return vision_zero_term(self.model, "image")

    # -- data ------------------------------------------------------------------------------------------------
    def _fit_prompt_length(self, rows: list[dict[str, Any]], split: str) -> list[dict[str, Any]]:
        """Rows over data.max_prompt_length: refused or filtered before step one (evr1.plan.on_over_limit)."""
        from evr1_train.data.plan_check import check_prompt_lengths

        limit = self.cfg.max_prompt_length
        keep = check_prompt_lengths(rows, self.data_opts, self.processor, self.family, limit, split)
        return [rows[i] for i in keep]

    def _usable(self, rows: list[dict[str, Any]], split: str) -> list[dict[str, Any]]:
        """Drop rows whose prompt cannot be built, whose media file is missing, or whose answer cannot be scored
        (`engine.rows.usable_rows` with `engine.rows.check_row`)."""
        return usable_rows(rows, self.data_opts, split, lambda row, i: check_row(row, i, self.data_opts, self.router))

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

        rid = row_id(row, index + 1)
        enc = cache.get(rid) if cache is not None else None
        if enc is None:
            inputs = row_to_inputs(row, self.data_opts, index, None)
            messages = self._prompt_messages(inputs.messages)
            enc = encode_prompt(self.processor, messages, inputs.images, inputs.videos, self.family)
            if cache is not None:
                cache[rid] = enc
            gt, extras = inputs.ground_truth, dict(inputs.extra_info)
        else:  # validation prompts are encoded once; only the cheap reward inputs are rebuilt
            gt, extras = ground_truth_of(row, self.data_opts), row_extra_info(row, self.data_opts, index)
        kind = str(row.get("kind") or row.get("data_source") or extras["problem_type"])
        offline = self._offline_ids(row, rid)
        return Prompt(uid, rid, kind, enc, gt, extras["problem_type"], extras, offline, row=row)

    def _prompt_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The conversation the model is prompted with (an agent trainer adds its tools' instructions)."""
        return messages

    def _response_text(self, row: Mapping[str, Any]) -> str | None:
        """The row's stored response this trainer uses: the hybrid trajectory (None when hybrid is off)."""
        from evr1_train.hybrid import row_offline_text

        return row_offline_text(row, self.hybrid) if self.hybrid.enable else None

    def _offline_ids(self, row: dict[str, Any], rid: str) -> tuple[int, ...] | None:
        """The row's stored response as tokens (EOS-terminated, fitted to the response limit), or None."""
        from evr1_train.hybrid import fit_offline_response

        text = self._response_text(row)
        if not text:
            return None
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        fitted = fit_offline_response(ids, self.cfg.max_response_length, self.eos[0], self.hybrid)
        if set(ids) & set(self.vision_ids):
            fitted = dataclasses.replace(
                fitted, token_ids=(), skipped=True, reason="stored trajectory contains vision placeholder tokens"
            )
        if fitted.skipped or fitted.truncated:
            logger.info("row %s: %s", rid, fitted.reason)
            self._offline_notes["skipped" if fitted.skipped else "truncated"] += 1
        return None if fitted.skipped else tuple(fitted.token_ids)

    def _prepare_batch(self, step: int, timer: StepTimer) -> list[Prompt]:
        with timer.phase("data"):
            prompts: list[Prompt] = []
            for index, row in self._next_rows():
                try:
                    prompts.append(self._prepare(index, row, f"{step}-{row_id(row, index + 1)}", None))
                except Exception as exc:  # a row that fails now (e.g. media vanished): skip it, keep training
                    self.state.skipped_rows += 1
                    logger.warning(
                        "step %d: skipped row %s: %s: %s", step, row_id(row, index + 1), type(exc).__name__, exc
                    )
        if not prompts:
            raise RuntimeError(f"step {step}: every row of the batch failed to load; see the warnings above")
        return prompts

    # -- generation + reward -----------------------------------------------------------------------------------
    def _policy(self, do_sample: bool) -> ModelPolicy:
        """The model sampling with this run's settings (vision placeholders suppressed): answers and agent turns."""
        cfg = self.cfg
        return ModelPolicy(
            self.model, self.pad_id, self.eos, self.runtime, do_sample=do_sample, temperature=cfg.temperature,
            suppress=self.vision_ids, top_p=cfg.top_p, top_k=cfg.top_k,
        )  # fmt: skip

    def _reward(self, prompt: Prompt, text: str) -> RewardResult:
        """The router's `RewardResult` for `text` as the answer to `prompt`."""
        from evr1_rewards import RewardInput

        return self.router.score(
            RewardInput(
                response=text,
                ground_truth=prompt.ground_truth,
                problem_type=prompt.problem_type,
                extras=prompt.extras,
                sample_id=prompt.row_id,
            )
        )

    def _score(self, prompt: Prompt, seq: Rollout) -> None:
        seq.text = self.tokenizer.decode(seq.response, skip_special_tokens=True)
        res = self._reward(prompt, seq.text)
        seq.overall, seq.accuracy, seq.format = res.overall, res.accuracy, res.format
        self._overlong(seq, len(seq.response))

    def _overlong(self, seq: Rollout, length: int) -> None:
        """DAPO's overlong penalty on a response of `length` generated tokens (when configured)."""
        if self.cfg.overlong_buffer_len:
            seq.overlong_penalty = algorithms.overlong_penalty(
                length,
                self.cfg.overlong_max_resp_len,
                self.cfg.overlong_buffer_len,
                self.cfg.overlong_penalty_factor,
            )
            seq.overall += seq.overlong_penalty

    def step(self) -> dict[str, float]:
        raise NotImplementedError

    def _sample(self, prompts: Sequence[Prompt], index: Sequence[int], do_sample: bool = True) -> list[Rollout]:
        """One unscored rollout per prompt (`index`: each one's position in its batch): a single generated turn
        (an agent trainer samples whole episodes)."""
        outs = self._policy(do_sample)(range(len(prompts)), [q.encoded for q in prompts], self.cfg.max_response_length)
        return [Rollout(i, resp, False) for i, resp in zip(index, outs, strict=True)]

    def _answer(self, prompts: list[Prompt], do_sample: bool) -> list[Rollout]:
        """One scored answer per prompt (held-out evaluation)."""
        seqs = self._sample(prompts, range(len(prompts)), do_sample)
        for prompt, seq in zip(prompts, seqs, strict=True):
            self._score(prompt, seq)
        return seqs

    def _answer_metrics(self, seqs: Sequence[Rollout], prefix: str) -> dict[str, float]:
        """Metrics of the answers beyond reward and accuracy (an agent trainer's tool use); none here."""
        return {}

    # -- validation --------------------------------------------------------------------------------------------
    def validate(self, limit: int | None = None) -> dict[str, float]:
        """Greedy (or sampled, per `rollout.val_kwargs.do_sample`) answers on the held-out rows; accuracy per kind."""
        rows = self.val_rows[:limit] if limit else self.val_rows
        if not rows:
            return {}
        t0 = time.perf_counter()
        per_kind: dict[str, list[float]] = defaultdict(list)
        seqs: list[Rollout] = []
        state = torch.random.get_rng_state()  # validation must not shift the training sample stream
        try:
            for start in range(0, len(rows), self.cfg.val_batch_size):
                chunk = rows[start : start + self.cfg.val_batch_size]
                prompts = [
                    self._prepare(start + j, r, f"val-{start + j}", self._val_cache) for j, r in enumerate(chunk)
                ]
                for prompt, seq in zip(prompts, self._answer(prompts, self.cfg.val_do_sample), strict=True):
                    seqs.append(seq)
                    per_kind[prompt.kind].append(seq.accuracy)
        finally:
            torch.random.set_rng_state(state)
        out = {
            "val/accuracy": mean([s.accuracy for s in seqs]),
            "val/reward": mean([s.overall for s in seqs]),
            "val/format": mean([s.format for s in seqs]),
            "val/response_length": mean([float(len(s.response)) for s in seqs]),
            "timing_s/validate": time.perf_counter() - t0,
            **self._answer_metrics(seqs, "val"),
        }
        out.update({f"val/accuracy/{k.split('/')[-1]}": mean(v) for k, v in sorted(per_kind.items())})
        return out

    # -- resumable state -----------------------------------------------------------------------------------------
    def state_dict(self) -> TrainerState:
        """Weights, optimiser, schedule, counters and RNG: enough for `load_state_dict` to take the same next step."""
        sched = self.scheduler.state_dict()
        sched.pop("lr_lambdas", None)  # a function of the config, rebuilt in __init__
        cuda = list(torch.cuda.get_rng_state_all()) if self.runtime.device.type == "cuda" else []
        return TrainerState(
            model=self._trainable_weights(),
            optimizer=self.optimizer.state_dict(),
            scheduler=sched,
            trainer=dataclasses.asdict(self.state),
            rng=capture_rng(cuda),
            python_random=random.getstate(),
        )

    def load_state_dict(self, state: TrainerState) -> None:
        """Restore a `state_dict()` into this trainer (same model architecture and trainable parameters)."""
        self._load_weights(state.model)
        self.optimizer.load_state_dict(dict(state.optimizer))  # torch moves the moments to each parameter's device
        self.scheduler.load_state_dict({**self.scheduler.state_dict(), **dict(state.scheduler)})
        self.state = TrainState(**dict(state.trainer))
        restore_rng(state.rng)
        random.setstate(state.python_random)

    def _trainable_weights(self) -> dict[str, torch.Tensor]:
        """All weights, or with LoRA only the adapter's (what a checkpoint stores)."""
        if self.lora:
            from peft import get_peft_model_state_dict

            return dict(get_peft_model_state_dict(self.model))
        return dict(self.model.state_dict())

    def _load_weights(self, weights: Mapping[str, torch.Tensor]) -> None:
        if self.lora:
            from peft import set_peft_model_state_dict

            result = set_peft_model_state_dict(self.model, dict(weights))
            bad = [k for k in result.missing_keys if ".lora_" in k] + list(result.unexpected_keys)
            if bad:
                raise ValueError(f"checkpoint adapter does not fit this model's LoRA settings: {bad[:5]}")
            return
        missing, unexpected = self.model.load_state_dict(dict(weights), strict=False)
        tied = set(getattr(self.model, "_tied_weights_keys", None) or ())  # names in a list or a mapping's keys
        if unexpected or [k for k in missing if k not in tied]:
            raise ValueError(
                f"checkpoint weights do not fit this model: missing {missing[:5]}, unexpected {unexpected[:5]}; "
                "resume with the model the checkpoint was made from (actor_rollout_ref.model.path)"
            )

    def _write_actor(self, folder: Path) -> None:
        """The model's own folder (Hugging Face format), loadable by transformers, vLLM and evr1-eval."""
        self.model.save_pretrained(folder, safe_serialization=True)
        self.processor.save_pretrained(folder)

    def _read_actor(self, folder: Path) -> dict[str, torch.Tensor]:
        if self.lora:
            from safetensors.torch import load_file

            from evr1_train.engine.lora import ADAPTER_WEIGHTS

            return dict(load_file(str(folder / ADAPTER_WEIGHTS)))
        model, _ = load_policy(str(folder), pick_runtime("cpu"))
        return dict(model.state_dict())

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Checkpoint into `folder/step_N` (see `engine.checkpoint`)."""
        from evr1_train.engine.checkpoint import save_checkpoint

        return save_checkpoint(Path(folder), self.state_dict(), self._write_actor, self.checkpoint_files())

    def load(self, folder: str | os.PathLike[str]) -> None:
        """Resume from a checkpoint folder written by `save`."""
        from evr1_train.engine.checkpoint import load_checkpoint

        self.load_state_dict(load_checkpoint(Path(folder), self._read_actor))

    #: what `step()` trains ("rl" or "sft"), recorded in the protocol file
    mode: ClassVar[str] = "rl"
    #: metrics shown on the progress bar (short name -> key)
    bar: ClassVar[Mapping[str, str]] = {"loss": "actor/loss", "s/it": "timing_s/step"}

    def describe(self) -> str:
        """One start-up line: device, data, algorithm."""
        return (
            f"local engine on {self.runtime.label}: {len(self.train_rows)} train / {len(self.val_rows)} held-out rows"
        )

    def describe_short(self) -> str:
        """What trains, for the plot title."""
        return self.mode

    def checkpoint_files(self) -> dict[str, Any]:
        """JSON files written into every checkpoint beside the weights (and into the run folder)."""
        from evr1_cache import TRAIN_SETTINGS_FILE
        from evr1_train.engine.protocol import protocol_record

        cfg = self.cfg
        record = protocol_record(
            engine="local",
            mode=self.mode,
            base_model=cfg.model_path,
            adapter=self._adapter_description(),
            data_opts=self.data_opts,
            processor=self.processor,
            answer={"think": cfg.reward_think, "reward_weights": dict(cfg.reward_weights)},
            eos_ids=self.eos,
            pad_id=self.pad_id,
            suppressed_ids=self.vision_ids,
            max_new_tokens=cfg.max_response_length,
            train_sampler={"temperature": cfg.temperature, "top_p": cfg.top_p, "top_k": cfg.top_k},
            validation={"do_sample": cfg.val_do_sample},
            agent=self._agent_record(),
        )
        return {TRAIN_SETTINGS_FILE: record.with_step(self.state.step).to_json()}

    def _agent_record(self) -> dict[str, Any] | None:
        """A tool-using trainer's tools and budgets for the protocol record (evaluators replay them); None here."""
        return None

    def _adapter_description(self) -> dict[str, Any] | None:
        if not self.lora:
            return None
        from evr1_train.engine.lora import describe_adapter

        return describe_adapter(self.model, self.cfg)
