"""Local-engine building blocks on real tensors: padding, reward placement, verl estimators/losses, config checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from evr1_train.engine.algorithms import actor_config, compute_advantages, outcome_rewards, policy_loss
from evr1_train.engine.batch import EncodedPrompt, collate_sequences, cut_at_eos, pad_responses
from evr1_train.engine.config import LocalConfig


def _cfg(**kw) -> LocalConfig:
    base = {"train_files": ("x.jsonl",), "val_files": ()}
    return LocalConfig(**{**base, **kw})


def test_cut_at_eos_keeps_eos_and_drops_padding() -> None:
    assert cut_at_eos([5, 6, 2, 7, 7], eos_ids=[2], pad_id=0) == [5, 6, 2]
    assert cut_at_eos([5, 6, 0, 0], eos_ids=[2], pad_id=0) == [5, 6]  # stopped by the batch, no EOS of its own
    assert cut_at_eos([], eos_ids=[2], pad_id=0) == []


def test_collate_left_pads_prompts_right_pads_responses() -> None:
    p1 = EncodedPrompt(
        torch.tensor([1, 2, 3]), {"pixel_values": torch.ones(4, 6), "image_grid_thw": torch.tensor([[1, 2, 2]])}
    )
    p2 = EncodedPrompt(torch.tensor([4, 5]), {})
    b = collate_sequences([p1, p2], [[7, 8, 9], [7]], pad_id=0, device="cpu", width=4)
    assert b["input_ids"].tolist() == [[1, 2, 3, 7, 8, 9, 0], [0, 4, 5, 7, 0, 0, 0]]
    assert b["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 1, 0], [0, 1, 1, 1, 0, 0, 0]]
    assert b["response_mask"].tolist() == [[1, 1, 1, 0], [1, 0, 0, 0]]
    assert b["pixel_values"].shape == (4, 6)
    assert "pixel_values_videos" not in b
    ids, mask = pad_responses([[1], []], pad_id=9)
    assert ids.tolist() == [[1], [9]]
    assert mask.tolist() == [[1], [0]]


def test_outcome_reward_sits_on_the_last_response_token() -> None:
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]], dtype=torch.float32)
    r = outcome_rewards([0.5, 1.0], mask)
    assert r.tolist() == [[0, 0, 0.5, 0], [1.0, 0, 0, 0]]


def test_grpo_and_rloo_advantages_are_verls() -> None:
    from verl.trainer.ppo import core_algos

    mask = torch.ones(4, 3)
    rewards = outcome_rewards([1.0, 0.0, 0.0, 0.0], mask)
    uids = ["a", "a", "b", "b"]
    adv = compute_advantages(_cfg(adv_estimator="grpo"), rewards, mask, uids)
    ref, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, np.array(uids, dtype=object))
    assert torch.equal(adv, ref)
    assert adv[0, 0] > 0 > adv[1, 0]
    assert adv[2].abs().sum() == 0
    rloo = compute_advantages(_cfg(adv_estimator="rloo"), rewards, mask, uids)
    assert rloo[0, 0] == pytest.approx(1.0)
    assert rloo[1, 0] == pytest.approx(-1.0)


def test_gdpo_needs_its_reward_keys() -> None:
    mask = torch.ones(2, 2)
    rewards = outcome_rewards([1.0, 0.0], mask)
    with pytest.raises(ValueError, match="gdpo_reward_keys"):
        compute_advantages(_cfg(adv_estimator="gdpo"), rewards, mask, ["a", "a"])
    cfg = _cfg(adv_estimator="gdpo", gdpo_reward_keys=("accuracy", "format"))
    adv = compute_advantages(
        cfg, rewards, mask, ["a", "a"], components={"accuracy": [1, 0], "format": [1, 1]}, prompt_width=3
    )
    assert adv[0, 0] > 0 > adv[1, 0]


def test_policy_loss_matches_verl_and_splits_micro_batches_exactly() -> None:
    """Micro-batch losses (normalised by mini-batch token count) sum to verl's whole-batch token-mean loss."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    torch.manual_seed(0)
    cfg = _cfg(loss_mode="vanilla")
    acfg = actor_config(cfg)
    lp = torch.randn(4, 5) * 0.1 - 1
    old = lp + torch.randn(4, 5) * 0.05
    adv = torch.randn(4, 1).expand(4, 5).clone()
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0]], dtype=torch.float32)
    kw = {"entropy": None, "ref_log_prob": None, "offline_mask": None, "hybrid": None}
    whole, _ = policy_loss(
        cfg,
        acfg,
        old_log_prob=old,
        log_prob=lp,
        advantages=adv,
        response_mask=mask,
        batch_num_tokens=int(mask.sum()),
        global_batch_size=4,
        **kw,
    )
    parts = sum(
        policy_loss(
            cfg,
            acfg,
            old_log_prob=old[s],
            log_prob=lp[s],
            advantages=adv[s],
            response_mask=mask[s],
            batch_num_tokens=int(mask.sum()),
            global_batch_size=4,
            **kw,
        )[0]
        for s in (slice(0, 2), slice(2, 4))
    )
    acfg2 = actor_config(cfg)
    ref, _ = get_policy_loss_fn("vanilla")(old, lp, adv, mask.bool(), "token-mean", acfg2, None)
    assert whole.item() == pytest.approx(ref.item(), rel=1e-6)
    assert parts.item() == pytest.approx(ref.item(), rel=1e-6)


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ValueError, match="critic"):
        _cfg(adv_estimator="gae")
    with pytest.raises(ValueError, match="ppo_mini_batch_size"):
        _cfg(train_batch_size=8, ppo_mini_batch_size=3)
    with pytest.raises(ValueError, match="train_files"):
        LocalConfig(train_files=(), val_files=())
    with pytest.raises(ValueError, match=r"engine\.device"):
        _cfg(device="tpu")
    cfg = LocalConfig.from_cfg(
        {
            "data": {"train_files": "t.jsonl", "val_files": ["v.jsonl"], "train_batch_size": 4},
            "actor_rollout_ref": {
                "actor": {"ppo_mini_batch_size": 2, "optim": {"lr": 0.01, "lr_warmup_steps_ratio": 0.1}},
                "rollout": {"n": 3},
            },
            "trainer": {"total_training_steps": 50},
        }
    )
    assert cfg.train_files == ("t.jsonl",)
    assert cfg.val_files == ("v.jsonl",)
    assert (cfg.n, cfg.lr, cfg.warmup_steps, cfg.mini_batches_per_step) == (3, 0.01, 5, 2)


def test_overlong_penalty_follows_dapo_soft_punishment() -> None:
    from evr1_train.engine.algorithms import overlong_penalty

    # max 2048, buffer 512: free up to 1536 tokens, then linear down to -factor at 2048 (and beyond)
    assert overlong_penalty(100, 2048, 512, 1.0) == 0.0
    assert overlong_penalty(1536, 2048, 512, 1.0) == 0.0
    assert overlong_penalty(1792, 2048, 512, 1.0) == pytest.approx(-0.5)
    assert overlong_penalty(2048, 2048, 512, 0.5) == pytest.approx(-0.5)
    assert overlong_penalty(2304, 2048, 512, 1.0) == pytest.approx(-1.5)


def _dapo(**reward_kwargs: object) -> dict:
    return {
        "data": {"train_files": "x.jsonl", "max_response_length": 64},
        "reward": {"reward_manager": {"name": "dapo"}, "reward_kwargs": reward_kwargs},
    }


def test_overlong_settings_are_read_like_verls_dapo_reward_manager() -> None:
    on = LocalConfig.from_cfg(_dapo(overlong_buffer_cfg={"enable": True, "len": 16, "penalty_factor": 0.5}))
    assert (on.overlong_buffer_len, on.overlong_max_resp_len, on.overlong_penalty_factor) == (16, 64, 0.5)
    explicit = LocalConfig.from_cfg(_dapo(max_resp_len=32, overlong_buffer_cfg={"enable": True, "len": 16}))
    assert explicit.overlong_max_resp_len == 32
    # switched off, or another reward manager (verl applies it in the dapo manager only): no shaping
    assert LocalConfig.from_cfg(_dapo(overlong_buffer_cfg={"enable": False, "len": 16})).overlong_buffer_len == 0
    naive = _dapo(overlong_buffer_cfg={"enable": True, "len": 16})
    naive["reward"]["reward_manager"]["name"] = "naive"
    assert LocalConfig.from_cfg(naive).overlong_buffer_len == 0
    with pytest.raises(ValueError, match=r"overlong_buffer_cfg\.len must be > 0 and <= "):
        LocalConfig.from_cfg(_dapo(overlong_buffer_cfg={"enable": True, "len": 128}))
    with pytest.raises(ValueError, match=r"must be > 0 when the overlong penalty is enabled"):
        LocalConfig.from_cfg(_dapo(overlong_buffer_cfg={"enable": True, "len": 0}))


def test_rng_states_go_back_to_the_device_index_they_came_from() -> None:
    """12 CUDA generators: `cuda.10` must return to device 10 (a sort by name would put it before `cuda.2`)."""
    from evr1_train.engine.state import capture_rng, device_index, restore_rng

    fake = [torch.full((8,), i, dtype=torch.uint8) for i in range(12)]
    states = capture_rng(fake)
    assert sorted(states, key=str) != [k for k in states if k != "torch_cpu"]  # names alone do not sort by index
    assert {device_index(k) for k in states} == {None, *range(12)}
    seen: dict[int, int] = {}
    done = restore_rng(states, set_cuda=lambda st, i: seen.__setitem__(i, int(st[0])))
    assert done == list(range(12))
    assert seen == {i: i for i in range(12)}
    # and a checkpoint round trip keeps the keys
    import safetensors.torch as st

    blob = st.load(st.save(states))
    seen.clear()
    restore_rng(blob, set_cuda=lambda s, i: seen.__setitem__(i, int(s[0])))
    assert seen == {i: i for i in range(12)}


def _compose_default(*overrides: str):
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="evr1_train.conf", version_base=None):
        return compose("evr1_trainer", overrides=list(overrides))


def _flat(node: object, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in (node or {}).items():  # type: ignore[attr-defined]
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


#: engine.* keys that LocalConfig does not read: the engine switch, and what `engine.local.run` reads itself.
_ENGINE_KEYS_READ_ELSEWHERE = {"engine.name", "engine.quickstart.", "engine.runs_dir"}


@pytest.mark.verl
def test_local_yaml_and_the_dataclass_defaults_agree() -> None:
    """conf/engine/local.yaml and LocalConfig write the same defaults, and every engine.* key is read somewhere."""
    import dataclasses

    from omegaconf import OmegaConf

    from evr1_train.engine.config import SOURCES

    cfg = _compose_default("trainer.experiment_name=local")  # output_dir: runs/${trainer.experiment_name}
    engine = _flat(OmegaConf.to_container(cfg.engine, resolve=True), "engine.")
    defaults = {f.name: f.default for f in dataclasses.fields(LocalConfig)}
    factories = {f.name: f.default_factory() for f in dataclasses.fields(LocalConfig) if callable(f.default_factory)}
    read = set()
    for src in SOURCES:
        key = src.keys[0]
        if not key.startswith("engine."):
            continue
        yaml_value = (
            OmegaConf.to_container(OmegaConf.select(cfg, key), resolve=True)
            if OmegaConf.is_config(OmegaConf.select(cfg, key))
            else OmegaConf.select(cfg, key)
        )
        assert yaml_value is not None, f"{key} is read by LocalConfig.{src.field} but missing from local.yaml"
        expected = factories.get(src.field, defaults[src.field])
        assert src.convert(yaml_value) == expected, (key, yaml_value, expected)
        read.update(k for k in engine if k == key or k.startswith(key + "."))
    unread = sorted(
        k for k in engine if k not in read and not any(k.startswith(p) for p in _ENGINE_KEYS_READ_ELSEWHERE)
    )
    assert not unread, f"engine keys nobody reads: {unread}"


#: LocalConfig defaults that deliberately differ from verl's ppo_trainer.yaml (verl sizes for a cluster; the local
#: engine's defaults are for one small machine; every quickstart/experiment preset sets these anyway).
_DIFFERS_FROM_VERL = {
    "train_batch_size",  # verl 1024
    "max_response_length",  # verl 512
    "n",  # verl 1: RL groups need n >= 2
    "adv_estimator",  # verl gae needs a critic the local engine does not have
    "ppo_mini_batch_size",  # verl 256
    "test_freq",  # verl -1 (never)
    "save_freq",  # verl -1 (never)
    "experiment_name",  # verl gsm8k
    "total_steps",  # verl null (epochs)
}


@pytest.mark.verl
def test_verl_keys_default_like_verl_unless_listed() -> None:
    import dataclasses

    from omegaconf import OmegaConf

    from evr1_train.engine.config import SOURCES

    cfg = _compose_default()
    defaults = {f.name: f.default for f in dataclasses.fields(LocalConfig)}
    differs = []
    for src in SOURCES:
        key = src.keys[0]
        if key.startswith("engine.") or src.field in ("train_files", "val_files", "model_path", "reward_weights"):
            continue
        value = OmegaConf.select(cfg, key)
        value = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
        converted = None if value is None else src.convert(value)
        if converted is not None and converted != defaults[src.field]:
            differs.append(src.field)
    assert sorted(differs) == sorted(_DIFFERS_FROM_VERL - {"total_steps"}), differs


def test_the_learning_curve_has_a_y_axis_label(tmp_path) -> None:
    """Both renderers label the y axis (matplotlib when installed, the Pillow fallback always)."""
    import numpy as np
    from PIL import Image

    from evr1_train.engine import plot

    series = {"held-out accuracy": [(0.0, 0.1), (10.0, 0.6)], "train reward (all rollouts)": [(1.0, 0.2), (10.0, 0.5)]}
    plot._pillow(series, tmp_path / "p.png", "t")
    pixels = np.asarray(Image.open(tmp_path / "p.png").convert("L"))
    label_box = pixels[50 - 18 : 50 - 6, 10:160]  # where `_pillow` writes Y_LABEL (above the plot frame)
    assert (label_box < 128).sum() > 30
    blank = pixels[50 - 18 : 50 - 6, 400:550]  # the same band further right holds nothing
    assert (blank < 128).sum() == 0
    try:
        import matplotlib.axes
    except ImportError:
        return
    labels: list[str] = []
    original = matplotlib.axes.Axes.set_ylabel

    def record(self, label, *a, **k):  # type: ignore[no-untyped-def]
        labels.append(label)
        return original(self, label, *a, **k)

    matplotlib.axes.Axes.set_ylabel = record  # type: ignore[method-assign]
    try:
        plot._matplotlib(series, tmp_path / "m.png", "t")
    finally:
        matplotlib.axes.Axes.set_ylabel = original  # type: ignore[method-assign]
    assert labels == [plot.Y_LABEL]


def test_the_metrics_log_reader_keeps_only_whole_json_objects(tmp_path: Path) -> None:
    from evr1_train.engine.tracking import read_jsonl

    log = tmp_path / "metrics.jsonl"
    assert read_jsonl(log) == []  # no log yet
    log.write_bytes(b'{"step": 1, "loss": 0.5}\n[1, 2]\n\xff{"step": 2}\n{"step": 3, "lo')  # a torn last line
    assert read_jsonl(log) == [{"step": 1, "loss": 0.5}]
