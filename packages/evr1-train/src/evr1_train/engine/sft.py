"""`SFTTrainer`: supervised fine-tuning on the same rows, prompts and cached frames as RL — the warm start.

Why the same trainer base: the prompt a model is warmed up on must be exactly the prompt RL and evaluation use
(`evr1_train.data`), from the same frame cache; the checkpoint format, validation (held-out accuracy through the
reward router), logging and resume are shared with the RL trainer. Only `step()` differs: teacher forcing on the
row's response column (`evr1.sft.response_key`, default the stored trajectory `offline_output`), EOS appended, cut
at `data.max_response_length` (counted and logged), with the token-mean negative log-likelihood of the response
tokens (prompt tokens are never trained on) — verl's SFT loss.

Use: `evr1-train +experiment=quickstart_sft` (local engine), then RL from its checkpoint:
`evr1-train +experiment=quickstart_sft_rl` (its `actor_rollout_ref.model.path` is the SFT run folder).

Names (stable): SFTTrainer
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from evr1_train.engine.base import BaseTrainer, StepTimer
from evr1_train.engine.policy import token_logprobs

logger = logging.getLogger(__name__)


class SFTTrainer(BaseTrainer):
    """Teacher forcing on a response column; `step()` is one optimiser step over `data.train_batch_size` rows."""

    mode: ClassVar[str] = "sft"
    bar: ClassVar[Mapping[str, str]] = {"loss": "sft/loss", "tok": "sft/response_tokens", "s/it": "timing_s/step"}

    def describe(self) -> str:
        return f"{super().describe()}, supervised on {self.cfg.sft_response_key!r}"

    def describe_short(self) -> str:
        return f"SFT on {self.cfg.sft_response_key}"

    def _response_text(self, row: Mapping[str, Any]) -> str | None:
        """The target: the row's `evr1.sft.response_key` column (EOS appended and fitted like a stored trajectory)."""
        value = row.get(self.cfg.sft_response_key)
        return value if isinstance(value, str) and value.strip() else None

    def _usable(self, rows: list[dict[str, Any]], split: str) -> list[dict[str, Any]]:
        """Training rows also need a response to train on (held-out rows are only generated on)."""
        good = super()._usable(rows, split)
        if split != "train":
            return good
        kept = [r for r in good if self._response_text(r) is not None]
        if len(kept) < len(good):
            logger.warning(
                "train data: %d of %d rows have no response text in column %r (evr1.sft.response_key); SFT skips them",
                len(good) - len(kept),
                len(good),
                self.cfg.sft_response_key,
            )
        return kept

    def step(self) -> dict[str, float]:
        """One optimiser step of teacher forcing on the next batch; returns loss, token counts, timings."""
        timer = StepTimer()
        t0 = time.perf_counter()
        self._offline_notes.clear()
        step = self.state.step + 1
        self.model.train()
        prompts = [p for p in self._prepare_batch(step, timer) if p.offline_ids]
        if not prompts:
            raise RuntimeError(f"step {step}: no row of the batch has a response to train on")
        targets = [list(p.offline_ids or ()) for p in prompts]
        width = max(len(t) for t in targets)
        n_tokens = sum(len(t) for t in targets)
        losses: list[float] = []
        with timer.phase("update"):
            self.optimizer.zero_grad(set_to_none=True)
            m = self.cfg.micro_batch_size
            for start in range(0, len(prompts), m):
                mb = prompts[start : start + m]
                logp, _, mask = token_logprobs(
                    self.model,
                    [p.encoded for p in mb],
                    targets[start : start + m],
                    pad_id=self.pad_id,
                    temperature=1.0,
                    runtime=self.runtime,
                    width=width,
                )
                loss = -(logp * mask).sum() / max(1, n_tokens)  # this micro-batch's share of the token-mean NLL
                (loss + self._vision_zero_term(mb)).backward()
                losses.append(float(loss.detach()))
            grad_norm = self._optimizer_step()
        self.state.step = step
        elapsed = time.perf_counter() - t0
        self.state.wall_s += elapsed
        return {
            "step": float(step),
            "epoch": float(self.state.epoch),
            "sft/loss": float(sum(losses)),
            "sft/response_tokens": float(n_tokens) / len(targets),
            "sft/truncated": float(self._offline_notes.get("truncated", 0)),
            "sft/skipped": float(self._offline_notes.get("skipped", 0)),
            "actor/loss": float(sum(losses)),
            "actor/grad_norm": grad_norm,
            "actor/lr": float(self.scheduler.get_last_lr()[0]),
            "data/skipped_rows": float(self.state.skipped_rows),
            "timing_s/step": elapsed,
            **{f"timing_s/{k}": v for k, v in timer.times.items()},
        }
