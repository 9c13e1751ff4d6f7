"""The start-up prompt-length check (`evr1_train.data.plan_check`) on real verl and transformers objects.

- the planner's length of each row equals the prompt verl's own agent-loop builder makes from `Evr1Dataset`'s items
  (`evr1-train parity`'s verl side: the processor's real input_ids), for a Qwen and a GLM tiny checkpoint;
- `Evr1Dataset` with a `max_prompt_length` below the longest row refuses to build, naming the row and the fix
  (`evr1.plan.on_over_limit: error`), or drops it (`filter`); the local engine refuses the same way at start-up.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.verl

ROOT = Path(__file__).resolve().parents[3]


def _testenv(name: str) -> Any:
    key = f"evr1_testenv_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, ROOT / "testenv" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module", params=["qwen2_5_vl", "glm4v"])
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("plan_startup")
    tiny, data = _testenv("tiny_vlm"), _testenv("family_data")
    kind = request.param
    return {"kind": kind, "model": tiny.build_tiny_vlm(work / "models", kind), **data.build_family_data(work, kind)}


def _planned(stack: dict[str, Any], **settings: Any) -> dict[str, int]:
    from transformers import AutoProcessor

    from evr1_cache.families import get_family
    from evr1_cache.plan import HFTextCounter, plan_rows
    from evr1_train.data import DataOptions, row_messages

    node = _testenv("family_data").data_node(stack["kind"], Path(stack["cache"]))
    opts = DataOptions.from_mapping({**node, "media_root": str(stack["root"]), **settings})
    rows = [__import__("json").loads(x) for x in Path(stack["built"]).read_text().splitlines()]
    proc = AutoProcessor.from_pretrained(stack["model"])
    plans = plan_rows(
        rows,
        get_family(stack["kind"]),
        opts.video_spec(),
        opts.image_spec(),
        counter=HFTextCounter(proc),
        messages=lambda row: row_messages(row, opts),
    )
    assert all(p.ok and p.exact for p in plans), [p.error for p in plans]
    return {p.row_id: p.total for p in plans}


def test_planned_lengths_equal_verls_prompts(stack: dict[str, Any]) -> None:
    from evr1_train import parity

    data = parity.load_parity_data(stack["built"], stack["cache"], 8)
    verl = {r.sample: len(r.prompt_ids) for r in parity.collect_verl(str(stack["model"]), data)}
    assert _planned(stack) == verl


def _dataset(stack: dict[str, Any], limit: int, mode: str) -> Any:
    from omegaconf import OmegaConf
    from transformers import AutoProcessor, AutoTokenizer
    from verl.utils.dataset.rl_dataset import get_dataset_class

    node = _testenv("family_data").data_node(stack["kind"], Path(stack["cache"]))
    cfg = OmegaConf.create(
        {
            "custom_cls": {"path": "pkg://evr1_train.data.dataset", "name": "Evr1Dataset"},
            "prompt_key": "problem",
            "filter_overlong_prompts": False,
            "return_raw_chat": True,
            "max_prompt_length": limit,
            "evr1": {**node, "media_root": str(stack["root"]), "on_over_limit": mode},
        }
    )
    tok, proc = AutoTokenizer.from_pretrained(stack["model"]), AutoProcessor.from_pretrained(stack["model"])
    return get_dataset_class(cfg)(str(stack["built"]), tok, cfg, processor=proc)


def test_the_verl_dataset_refuses_or_filters_over_long_rows(stack: dict[str, Any]) -> None:
    from evr1_train.data.plan_check import PromptTooLong

    lengths = _planned(stack)
    longest = max(lengths, key=lambda k: lengths[k])
    limit = lengths[longest] - 1
    over = sorted(k for k, v in lengths.items() if v > limit)
    with pytest.raises(PromptTooLong, match=f"row {longest}: {lengths[longest]} tokens") as info:
        _dataset(stack, limit, "error")
    assert f"max_prompt_length={limit}" in str(info.value)
    assert "on_over_limit=filter" in str(info.value)
    kept = _dataset(stack, limit, "filter")
    assert sorted(r["problem_id"] for r in kept.dataframe) == sorted(set(lengths) - set(over))
    assert len(_dataset(stack, lengths[longest], "error").dataframe) == len(lengths)


@pytest.mark.parametrize("stack", ["qwen2_5_vl"], indirect=True)  # the engine's wiring; the check is per family above
def test_the_local_engine_refuses_at_start_up(stack: dict[str, Any], tmp_path: Path) -> None:
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from evr1_train.data.plan_check import PromptTooLong
    from evr1_train.engine.config import LocalConfig
    from evr1_train.engine.trainer import LocalTrainer

    with initialize_config_module(config_module="evr1_train.conf", version_base=None):
        cfg = compose(
            "evr1_trainer",
            overrides=[
                "+experiment=quickstart",
                f"engine.output_dir={tmp_path}",
                "engine.quickstart.enable=false",
                "engine.num_threads=1",
                "engine.loggers=[jsonl]",
                f"data.train_files={stack['built']}",
                "data.val_files=null",
                "data.train_batch_size=1",
                f"actor_rollout_ref.model.path={stack['model']}",
                "actor_rollout_ref.rollout.n=2",
                "actor_rollout_ref.actor.ppo_mini_batch_size=1",
            ],
        )
    OmegaConf.set_struct(cfg, False)
    node = _testenv("family_data").data_node(stack["kind"], Path(stack["cache"]))
    cfg.data.evr1.cache_dir = node["cache_dir"]
    cfg.data.evr1.media_root = str(stack["root"])
    cfg.data.evr1.video = node["video"]
    cfg.data.evr1.image = node["image"]
    # the experiment's own prompt settings (the quickstart asks for no <think>): the trainer's exact messages
    lengths = _planned(stack, think=bool(cfg.data.evr1.think), system_prompt=cfg.data.evr1.system_prompt)
    limit = max(lengths.values()) - 1
    cfg.data.max_prompt_length = limit
    assert cfg.data.evr1.on_over_limit == "error"  # the default, through evr1.plan.on_over_limit
    with pytest.raises(PromptTooLong, match="train row"):
        LocalTrainer(LocalConfig.from_cfg(cfg))
    cfg.evr1.plan.on_over_limit = "filter"
    trainer = LocalTrainer(LocalConfig.from_cfg(cfg))
    assert len(trainer.train_rows) == sum(1 for v in lengths.values() if v <= limit)
