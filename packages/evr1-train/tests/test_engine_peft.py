"""LoRA (peft), frozen modules and the SFT warm start on the local engine, with the shortened quickstart's tiny
Qwen2.5-VL: frozen weights stay bit-identical over a step, a LoRA checkpoint holds only the adapter and resumes to
the same next step, `evr1-train merge` writes a full model that computes what the adapter model computes, SFT lowers
the response NLL and RL starts from its checkpoint."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.verl  # verl's core_algos (the RL step), installed in the `train` nox session

#: 4 prompts x 4 rollouts of at most 8 tokens: one quick step.
ONE_STEP = [
    "actor_rollout_ref.rollout.n=4",
    "data.train_batch_size=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "data.max_response_length=8",
]


def _trainer(cfg: Any) -> Any:
    from evr1_train.engine.config import LocalConfig
    from evr1_train.engine.local import make_trainer

    return make_trainer(LocalConfig.from_cfg(cfg))


def test_frozen_modules_do_not_change_over_a_step(quickstart_cfg: Any, tmp_path: Path) -> None:
    trainer = _trainer(quickstart_cfg(tmp_path, *ONE_STEP, "evr1.frozen_modules=[vision_tower,merger,embeddings]"))
    named = dict(trainer.model.named_parameters())
    frozen = {n for n, p in named.items() if not p.requires_grad}
    assert frozen
    assert all(n.startswith(("model.visual.", "model.language_model.embed_tokens")) for n in frozen), frozen
    assert any(".merger." in n for n in frozen)
    assert not any(n.startswith("model.language_model.layers.") for n in frozen)
    report = trainer.parameters_report
    assert report.frozen == sum(p.numel() for n, p in named.items() if n in frozen)
    assert report.trainable == sum(p.numel() for p in named.values() if p.requires_grad)
    assert "frozen" in trainer.parameters_line()
    # the optimiser holds only trainable parameters
    in_optimizer = {id(p) for g in trainer.optimizer.param_groups for p in g["params"]}
    assert in_optimizer == {id(p) for p in named.values() if p.requires_grad}
    before = {n: p.detach().clone() for n, p in named.items()}
    metrics = trainer.step()
    assert math.isfinite(metrics["actor/pg_loss"])
    after = dict(trainer.model.named_parameters())
    assert all(torch.equal(before[n], after[n]) for n in frozen)
    assert any(not torch.equal(before[n], after[n]) for n in named if n not in frozen)


def test_frozen_patterns_that_match_nothing_are_errors(quickstart_cfg: Any, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="did you mean 'vision_tower'"):
        _trainer(quickstart_cfg(tmp_path, *ONE_STEP, "evr1.frozen_modules=[vision]"))
    with pytest.raises(ValueError, match=r"matches no parameter.*names look like: model\."):
        _trainer(quickstart_cfg(tmp_path, *ONE_STEP, "evr1.frozen_modules=['model\\.vision\\..*']"))


LORA = [*ONE_STEP, "actor_rollout_ref.actor.optim.lr=3e-3"]


def test_lora_checkpoints_hold_the_adapter_and_resume_to_the_same_step(quickstart_cfg: Any, tmp_path: Path) -> None:
    cfg = quickstart_cfg(tmp_path / "a", *LORA, experiment="quickstart_lora")
    a = _trainer(cfg)
    assert type(a.model).__name__.startswith("PeftModel")
    base_before = {n: p.detach().clone() for n, p in a.model.named_parameters() if ".lora_" not in n}
    trainable = [n for n, p in a.model.named_parameters() if p.requires_grad]
    assert trainable
    assert all(".lora_" in n for n in trainable)
    a.step()
    folder = a.save(tmp_path / "ckpt")
    files = {p.name for p in (folder / "actor").iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors"} <= files
    assert "model.safetensors" not in files  # only the adapter is saved
    from safetensors.torch import load_file

    saved = load_file(str(folder / "actor" / "adapter_model.safetensors"))
    assert all(".lora_" in k for k in saved)
    assert sum(t.numel() for t in saved.values()) == sum(p.numel() for p in a.model.parameters() if p.requires_grad)
    optimizer = load_file(str(folder / "optimizer.safetensors"))
    assert sum(t.numel() for k, t in optimizer.items() if k.endswith(".exp_avg")) == sum(
        t.numel() for t in saved.values()
    )
    protocol = json.loads((folder / "evr1_train_protocol.json").read_text())
    assert protocol["adapter"]["type"] == "lora"
    assert protocol["adapter"]["rank"] == 32
    m_a = a.step()
    after = {n: p for n, p in a.model.named_parameters() if ".lora_" not in n}
    assert all(torch.equal(base_before[n], after[n]) for n in base_before)  # the base model never moves

    b = _trainer(cfg)
    b.load(folder)
    assert b.state.step == 1
    m_b = b.step()
    for key in ("critic/score/mean", "response_length/mean", "actor/pg_loss", "actor/grad_norm"):
        assert m_a[key] == pytest.approx(m_b[key], rel=1e-5, abs=1e-6), key
    wa = {n: p for n, p in a.model.named_parameters() if ".lora_" in n}
    wb = dict(b.model.named_parameters())
    assert all(torch.allclose(wa[n], wb[n], atol=1e-6) for n in wa)


def test_lora_reference_policy_is_the_base_model_without_a_second_copy(quickstart_cfg: Any, tmp_path: Path) -> None:
    """With the KL loss on, LoRA's reference log-probs come from the actor with its adapter disabled (verl's
    `ref_in_actor`): no reference model is loaded, they equal a separately loaded base model's, and they stay the
    base's while the adapter trains."""
    from evr1_train.engine.base import StepTimer
    from evr1_train.engine.policy import load_policy

    kl = ["actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.actor.kl_loss_coef=0.1"]
    trainer = _trainer(quickstart_cfg(tmp_path, *LORA, *kl, experiment="quickstart_lora"))
    assert trainer.ref_in_actor
    assert trainer.ref_model is None
    full = _trainer(quickstart_cfg(tmp_path / "full", *ONE_STEP, *kl))
    assert full.ref_model is not None  # full fine-tuning still needs its own frozen copy
    base, _ = load_policy(trainer.cfg.model_path, trainer.runtime)
    from evr1_train.engine.base import Rollout

    prompts = [trainer._prepare(i, row, f"kl-{i}", None) for i, row in enumerate(trainer.train_rows[:2])]
    seqs = [Rollout(i, [11, 12, 13, 14], False) for i in range(2)]

    def ref_and_actor() -> tuple[torch.Tensor, torch.Tensor]:
        _, ref = trainer._old_and_ref_logprobs(prompts, seqs, 4, StepTimer())
        return ref, trainer._logprobs(trainer.model, prompts, seqs, 4)

    want = trainer._logprobs(base.eval(), prompts, seqs, 4)
    ref0, actor0 = ref_and_actor()
    assert torch.allclose(ref0, want, atol=1e-5)
    metrics = trainer.step()
    assert math.isfinite(metrics["actor/kl_loss"])
    ref1, actor1 = ref_and_actor()
    assert torch.allclose(ref1, want, atol=1e-5)  # the reference stays the base model
    assert not torch.allclose(actor1, actor0, atol=1e-5)  # while the adapter moved the actor
    assert trainer.model.training  # the actor is back in training mode after the reference pass


def test_merge_writes_a_full_model_that_computes_the_same(quickstart_cfg: Any, tmp_path: Path) -> None:
    from transformers import AutoModelForImageTextToText

    from evr1_train.cli import main

    trainer = _trainer(quickstart_cfg(tmp_path, *LORA, experiment="quickstart_lora"))
    trainer.step()  # adapters move away from their zero start, so merging changes the weights
    folder = trainer.save(tmp_path / "ckpt")
    out = tmp_path / "merged"
    assert main(["merge", str(tmp_path / "ckpt"), "--out", str(out)]) == 0
    assert (out / "config.json").exists()
    assert not (out / "adapter_config.json").exists()
    merged = AutoModelForImageTextToText.from_pretrained(out).eval()
    from evr1_cache import use_reference_mrope

    use_reference_mrope(merged)  # as the trainer's load_policy and evr1-eval's hf backend load every model
    prompt = trainer._prepare(0, trainer.val_rows[0], "x", None)
    from evr1_train.engine.batch import collate_prompts

    batch = collate_prompts([prompt.encoded], trainer.pad_id, "cpu")
    trainer.model.eval()
    with torch.no_grad():
        want = trainer.model(**batch).logits
        got = merged(**batch).logits
    assert torch.allclose(want, got, atol=1e-4)
    assert json.loads((out / "evr1_train_protocol.json").read_text())["adapter"]["merged_into"]
    assert main(["merge", str(folder.parent.parent / "nothing")]) == 2


def _nll(trainer: Any, rows: list[dict[str, Any]]) -> float:
    """Mean token NLL of the trainer's SFT targets on `rows` (no update)."""
    from evr1_train.engine.policy import token_logprobs

    per = []
    with torch.no_grad():
        for i, row in enumerate(rows):
            prompt = trainer._prepare(i, row, f"nll-{i}", None)
            logp, _, mask = token_logprobs(
                trainer.model,
                [prompt.encoded],
                [list(prompt.offline_ids)],
                pad_id=trainer.pad_id,
                temperature=1.0,
                runtime=trainer.runtime,
            )
            per.append(float(-(logp * mask).sum() / mask.sum()))
    return sum(per) / len(per)


def test_sft_lowers_the_response_nll_and_rl_starts_from_its_checkpoint(quickstart_cfg: Any, tmp_path: Path) -> None:
    from evr1_train.engine.local import run

    sft_cfg = quickstart_cfg(
        tmp_path / "sft",
        *ONE_STEP,
        "data.max_response_length=16",
        "trainer.total_training_steps=4",
        "trainer.test_freq=4",
        experiment="quickstart_sft",
    )
    trainer = _trainer(sft_cfg)
    assert trainer.mode == "sft"
    rows = trainer.train_rows[:8]
    before = _nll(trainer, rows)
    metrics = [trainer.step() for _ in range(4)]
    assert all(math.isfinite(m["sft/loss"]) and m["sft/response_tokens"] > 2 for m in metrics)
    assert _nll(trainer, rows) < before - 0.5  # teacher forcing on the stored answers fits them
    summary = run(sft_cfg)
    assert summary.steps == 4
    protocol = json.loads((tmp_path / "sft" / "evr1_train_protocol.json").read_text())
    assert protocol["mode"] == "sft"
    # RL from it: the run folder names its newest checkpoint's model
    rl_cfg = quickstart_cfg(
        tmp_path / "rl", *ONE_STEP, f"actor_rollout_ref.model.path={tmp_path / 'sft'}", experiment="quickstart_sft_rl"
    )
    rl = _trainer(rl_cfg)
    from transformers import AutoModelForImageTextToText

    actor = tmp_path / "sft" / "checkpoints" / "step_000004" / "actor"
    sft_weights = AutoModelForImageTextToText.from_pretrained(actor).state_dict()
    rl_weights = rl.model.state_dict()
    assert all(torch.equal(sft_weights[k], rl_weights[k]) for k in sft_weights)
    assert not rl.hybrid.enable
    assert math.isfinite(rl.step()["actor/pg_loss"])
