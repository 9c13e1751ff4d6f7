"""The local engine end to end on the quickstart task (tiny random Qwen2.5-VL, generated clips, frame cache).

Shortened quickstart: the loop runs and the held-out reward rises above its start; a resumed run takes exactly the
step the uninterrupted run took; every algorithm preset of the verl path (evr1_algo/*) runs one local step.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest
import torch


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


pytestmark = pytest.mark.verl  # needs verl (core_algos) installed: the `train` nox session


def test_short_quickstart_improves_held_out_reward(quickstart_cfg: Any, tmp_path: Path) -> None:
    from evr1_train.engine.local import run
    from evr1_train.engine.tracking import read_jsonl

    cfg = quickstart_cfg(
        tmp_path / "run",
        "trainer.total_training_steps=30",
        "trainer.test_freq=15",
        "trainer.save_freq=0",
        "evr1.hybrid.k=2",
        "data.max_response_length=14",
    )
    summary = run(cfg)
    assert summary.steps == 30
    rewards = [h["val/reward"] for h in summary.history]
    assert len(rewards) == 3
    assert rewards[0] < 0.2, rewards  # a random model rarely answers, let alone in format
    assert rewards[-1] > rewards[0] + 0.1, rewards  # ... and learns to (the stored answers show it how)
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    train = [r for r in rows if "critic/score/mean" in r]
    assert [int(r["step"]) for r in train] == list(range(1, 31))
    assert all(r["hybrid/offline_samples"] == 16 and r["hybrid/online_samples"] == 16 for r in train)
    assert all(math.isfinite(r["actor/pg_loss"]) and r["timing_s/rollout"] > 0 for r in train)
    assert (tmp_path / "run" / "learning_curve.png").stat().st_size > 1000
    assert (tmp_path / "run" / "checkpoints" / "latest.json").exists()  # the final step is always saved


def test_resume_reproduces_the_next_step(quickstart_cfg: Any, tmp_path: Path) -> None:
    from evr1_train.engine.config import LocalConfig
    from evr1_train.engine.trainer import LocalTrainer

    lc = LocalConfig.from_cfg(quickstart_cfg(tmp_path / "a", "actor_rollout_ref.actor.optim.lr=3e-3"))
    a = LocalTrainer(lc)
    a.step()
    folder = a.save(tmp_path / "ckpt")
    m_a = a.step()
    b = LocalTrainer(lc)
    b.load(folder)
    assert b.state.step == 1
    m_b = b.step()
    for key in (
        "critic/score/mean",
        "critic/accuracy/mean",
        "response_length/mean",
        "actor/pg_loss",
        "actor/grad_norm",
    ):
        assert m_a[key] == pytest.approx(m_b[key], rel=1e-5, abs=1e-6), key
    wa, wb = a.model.state_dict(), b.model.state_dict()
    assert all(torch.allclose(wa[k], wb[k], atol=1e-6) for k in wa)
    assert not list(folder.rglob("*.bin"))
    assert not list(folder.rglob("*.pt"))


#: A small single step: 4 prompts x 4 rollouts of at most 8 tokens, two optimiser steps.
ONE_STEP = [
    "actor_rollout_ref.rollout.n=4",
    "data.train_batch_size=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=2",
    "data.max_response_length=8",
]
PRESETS = ["grpo", "dapo", "gspo", "cispo", "rloo", "reinforce_pp", "remax", "gdpo"]


@pytest.mark.parametrize("preset", PRESETS)
def test_every_algorithm_preset_runs_one_local_step(quickstart_cfg: Any, tmp_path: Path, preset: str) -> None:
    from evr1_train.engine.config import LocalConfig
    from evr1_train.engine.trainer import LocalTrainer

    cfg = quickstart_cfg(
        tmp_path / preset,
        f"+evr1_algo={preset}",
        *ONE_STEP,
    )
    lc = LocalConfig.from_cfg(cfg)
    trainer = LocalTrainer(lc)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    metrics = trainer.step()
    assert metrics["step"] == 1
    assert math.isfinite(metrics["actor/pg_loss"])
    moved = any(not torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())
    assert moved, f"{preset}: no parameter changed"
    if lc.use_kl_loss:
        assert "actor/kl_loss" in metrics
    if preset == "dapo":
        assert metrics["filter_groups/batches_drawn"] >= 1


def test_qwen3_vl_quickstart_runs_a_step(quickstart_compose: Any, tmp_path: Path) -> None:
    """Qwen3-VL (patch 16, factor 32, `mm_token_type_ids` for its M-RoPE) through the same engine, from the shipped
    `quickstart_qwen3_vl` preset."""
    from evr1_train.engine.local import run

    cfg = quickstart_compose(
        tmp_path / "q3",
        "engine.quickstart.data.n_train=16",
        "engine.quickstart.data.n_heldout=4",
        "trainer.total_training_steps=2",
        "trainer.test_freq=2",
        "data.train_batch_size=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        experiment="quickstart_qwen3_vl",
    )
    assert cfg.engine.quickstart.model.arch == "qwen3_vl"
    assert cfg.data.evr1.video.size_factor == cfg.data.evr1.image.size_factor == 32
    assert cfg.engine.quickstart.model.video_max_pixels == cfg.data.evr1.video.max_pixels
    summary = run(cfg)
    assert summary.steps == 2
    assert "val/accuracy" in summary.last_val
    assert '"model_type": "qwen3_vl"' in (tmp_path / "q3" / "model-init" / "config.json").read_text()


def test_dapo_overlong_shaping_lowers_the_rewards_of_long_responses(quickstart_cfg: Any, tmp_path: Path) -> None:
    from types import SimpleNamespace

    from evr1_train.engine.algorithms import overlong_penalty
    from evr1_train.engine.config import LocalConfig
    from evr1_train.engine.trainer import LocalTrainer

    cfg = quickstart_cfg(
        tmp_path / "overlong",
        "+evr1_algo=dapo",
        "reward.reward_kwargs.overlong_buffer_cfg.enable=true",
        "reward.reward_kwargs.overlong_buffer_cfg.len=4",
        *ONE_STEP,
        "algorithm.filter_groups.enable=false",  # every group counts, even all-equal ones
    )
    lc = LocalConfig.from_cfg(cfg)
    assert (lc.overlong_buffer_len, lc.overlong_max_resp_len) == (4, 8)
    trainer = LocalTrainer(lc)
    # every answer "correct", so the reward that is left is 1 + the length penalty
    trainer.router = SimpleNamespace(score=lambda _: SimpleNamespace(overall=1.0, accuracy=1.0, format=1.0))
    lengths: list[int] = []
    score = trainer._score

    def recording(prompt, seq):  # type: ignore[no-untyped-def]
        score(prompt, seq)
        lengths.append(len(seq.response))
        assert seq.overall == pytest.approx(1.0 + overlong_penalty(len(seq.response), 8, 4, 1.0))

    trainer._score = recording  # type: ignore[method-assign]
    metrics = trainer.step()
    assert lengths
    expected = [overlong_penalty(n, 8, 4, 1.0) for n in lengths]
    assert metrics["reward/overlong_penalty/mean"] == pytest.approx(sum(expected) / len(expected))
    assert metrics["reward/overlong_frac"] == pytest.approx(sum(e < 0 for e in expected) / len(expected))
    assert metrics["critic/score/mean"] == pytest.approx(1.0 + metrics["reward/overlong_penalty/mean"])


def test_rollout_dumps_of_a_run_resume_without_duplicates_and_build_the_viewer(
    quickstart_cfg: Any, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The quickstart's dumps (on in experiment=quickstart, off in every 7B/8B preset: test_presets): groups of n
    responses with rewards, advantages, offline flags and cached frames; a run resumed from an earlier checkpoint
    rewrites the later steps once; the viewer is built (the quickstart's `write_viewer`)."""
    import json

    from evr1_train.engine.local import run
    from evr1_train.rollouts.view import read_dump

    out = tmp_path / "run"
    steps = ["trainer.total_training_steps=4", "trainer.test_freq=0", "trainer.save_freq=2",
             "evr1.rollout_dump.every_n_steps=2", "evr1.rollout_dump.write_viewer=true",
             "data.max_response_length=8"]  # fmt: skip
    run(quickstart_cfg(out, *steps))
    viewer = out / "viewer" / "index.html"
    printed = capsys.readouterr().out
    assert f"[evr1] rollout viewer: {viewer.resolve()}" in printed
    # the run says what is next: export its held-out rows, then evaluate them as trained
    assert f"evr1-train export-heldout {out} {out / 'heldout'}\n" in printed
    assert f"evr1-eval run --from-train {out} --backend hf --benchmarks evr1_data" in printed
    from evr1_train.export import main as export_main

    monkeypatch.setenv("UV", "/usr/bin/uv")
    assert export_main([str(out), str(out / "heldout")]) == 0
    assert f"  uv run evr1-eval run --from-train {out} " in capsys.readouterr().out
    exported = out / "heldout" / "evr1_data.jsonl"
    assert exported.stat().st_mode & 0o777 == 0o666 & ~_umask()  # as readable as any other output
    _, records, problems = read_dump(out / "rollouts")
    assert not problems
    assert [r["step"] for r in records] == [1] * 8 + [2] * 8 + [4] * 8  # include_first + every 2 steps, batch 8
    for rec in records:
        assert len(rec["responses"]) == 4
        assert rec["engine"] == "local"
        assert sum(x["offline"] for x in rec["responses"]) <= 1  # hybrid k=1
        advs = [x["advantage"] for x in rec["responses"]]
        assert abs(sum(advs)) < 1e-3, advs  # GRPO: advantages of a group sum to zero
        assert {"overall", "accuracy", "format"} <= set(rec["responses"][0]["reward"])
        for m in rec["media"]:
            assert m["frames_from"] == "cache", m
            assert m["kind"] == "image" or m["frame_indices"], m
    assert any(x["offline"] for r in records for x in r["responses"])
    before = {p.name: p.read_bytes() for p in (out / "rollouts").glob("step-*.jsonl")}
    # the run "died" after step 4 with its last checkpoint at step 2: resume and finish again
    import shutil

    shutil.rmtree(out / "checkpoints" / "step_000004")
    (out / "checkpoints" / "latest.json").write_text(json.dumps({"path": "step_000002"}))
    run(quickstart_cfg(out, *steps))
    _, again, _ = read_dump(out / "rollouts")
    assert [r["step"] for r in again] == [r["step"] for r in records]  # step 4 once, steps 1 and 2 kept
    after = {p.name: p.read_bytes() for p in (out / "rollouts").glob("step-*.jsonl")}
    assert after["step-000001.jsonl"] == before["step-000001.jsonl"]
    assert after["step-000002.jsonl"] == before["step-000002.jsonl"]
    manifest = json.loads((out / "rollouts" / "manifest.json").read_text())
    assert manifest["dropped_on_resume"] == [4]
    assert (out / "viewer" / "data" / "run" / "index.js").is_file()
