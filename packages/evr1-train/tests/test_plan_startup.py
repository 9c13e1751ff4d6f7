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


# -- rows that `evr1-cache build --plan --on-over-limit resample` shrank: trained with their own spec -------------

FLAGS = ["--fps", "2", "--min-frames", "2", "--max-frames", "8", "--min-pixels", "3136", "--max-pixels", "12544",
         "--image-min-pixels", "3136", "--image-max-pixels", "12544"]  # fmt: skip  # = family_data.SPECS["qwen2_5_vl"]


@pytest.fixture(scope="module")
def resampled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A dataset with one over-long video row, built with `build --plan --on-over-limit resample` against the real
    tiny Qwen2.5-VL processor; the trainer's limit is the long row's prompt minus one under the configured spec."""
    from transformers import AutoProcessor

    from evr1_cache.cli import main
    from evr1_cache.dataset import read_rows
    from evr1_cache.plan import HFTextCounter, default_messages, plan_rows
    from evr1_cache.testing import make_synthetic_video
    from evr1_train.data import DataOptions, row_messages

    work = tmp_path_factory.mktemp("resampled")
    tiny, data = _testenv("tiny_vlm"), _testenv("family_data")
    model = tiny.build_tiny_vlm(work / "models", "qwen2_5_vl")
    media = work / "media"
    data.build_family_data(work, "qwen2_5_vl")  # v0 (3 s), v1, i2 under media/
    make_synthetic_video(media / "clips" / "long.mp4", n_frames=96, fps=8.0, size=(160, 96))  # 12 s: 8 frames
    long_row = {**data.ROWS[1], "problem_id": "long", "videos": ["clips/long.mp4"]}
    rows = [data.ROWS[0], long_row, data.ROWS[2]]
    (media / "plan.jsonl").write_text("".join(__import__("json").dumps(r) + "\n" for r in rows))
    proc = AutoProcessor.from_pretrained(model)
    opts = DataOptions.from_mapping({**data.data_node("qwen2_5_vl", work / "cache"), "media_root": str(media)})
    spec, ispec = opts.video_spec(), opts.image_spec()
    counter = HFTextCounter(proc)
    raw = read_rows(media / "plan.jsonl")

    def lengths(messages: Any) -> dict[str, int]:
        plans = plan_rows(raw, "qwen2_5_vl", spec, ispec, counter=counter, messages=messages, media_root=media)
        return {p.row_id: p.total for p in plans}

    trainer_len = lengths(lambda r: row_messages(r, opts))
    cli_len = lengths(lambda r: default_messages(r))
    limit = trainer_len["long"] - 1  # the trainer's data.max_prompt_length: only the long row is over it
    assert max(v for k, v in trainer_len.items() if k != "long") <= limit
    margin = max(trainer_len[k] - cli_len[k] for k in trainer_len)  # the text evr1-train adds to every prompt
    cache = work / "cache"
    rc = main(["build", str(media / "plan.jsonl"), "--out", str(cache), "--no-progress", "--family", "qwen2_5_vl",
               *FLAGS, "--model", str(model), "--plan", "--max-prompt-length", str(limit), "--prompt-margin",
               str(margin), "--on-over-limit", "resample"])  # fmt: skip
    assert rc == 0
    built = cache / "plan.evr1.jsonl"
    out = read_rows(built)
    assert [r["problem_id"] for r in out] == ["v0", "long", "i2"]
    assert out[0]["video_cache"][0]["meta"]["spec_key"] == spec.key()  # the CLI flags are the trainer's spec
    return {"model": model, "media": media, "cache": cache, "built": built, "rows": out, "opts": opts,
            "limit": limit, "spec": spec, "proc": proc}  # fmt: skip


def _own_plan(r: dict[str, Any], opts: Any) -> Any:
    """The planner's figure for the long row with the trainer's messages under its own spec (the start-up check's)."""
    from evr1_cache.plan import HFTextCounter, plan_rows
    from evr1_train.data import row_messages

    plans = plan_rows(r["rows"], "qwen2_5_vl", opts.video_spec(), opts.image_spec(), counter=HFTextCounter(r["proc"]),
                      messages=lambda row: row_messages(row, opts), media_root=r["media"])  # fmt: skip
    return next(p for p in plans if p.row_id == "long")


def _verl_dataset(r: dict[str, Any], built: Any, limit: int) -> Any:
    stack = {"kind": "qwen2_5_vl", "cache": r["cache"], "root": r["media"], "built": built, "model": r["model"]}
    return _dataset(stack, limit, "error")


def test_a_resampled_row_passes_the_verl_start_up_check_and_gets_its_own_frames(resampled: dict[str, Any]) -> None:
    from evr1_cache.spec import SamplingSpec
    from evr1_train import parity
    from evr1_train.data.dataset import Evr1Dataset

    r = resampled
    long = r["rows"][1]
    small = SamplingSpec.from_dict(long["evr1_plan"]["video"])
    assert small.key() != r["spec"].key()
    ds = _verl_dataset(r, r["built"], r["limit"])  # no PromptTooLong: the row is measured under its own spec
    assert [row["problem_id"] for row in ds.dataframe] == ["v0", "long", "i2"]
    own = _own_plan(r, ds.evr1)
    assert own.total <= r["limit"]
    media = own.media[0]
    assert media.source == "cache"
    assert media.nframes < 8
    _, videos, _ = Evr1Dataset._process_multi_modal_info(ds[1]["raw_prompt"], None, ds.config)
    frames, meta = videos[0]
    assert tuple(frames.shape) == (media.nframes, 3, media.height, media.width)
    assert list(meta["frames_indices"]) == list(media.frames_indices)
    # verl's own agent-loop prompt builder on the same items: the processor's input_ids are the plan's figure
    data = parity.load_parity_data(r["built"], r["cache"], 8)
    verl = {rec.sample: len(rec.prompt_ids) for rec in parity.collect_verl(str(r["model"]), data)}
    assert verl["long"] == own.total


def test_a_resampled_row_passes_the_local_start_up_check_with_its_own_inputs(
    resampled: dict[str, Any], tmp_path: Path
) -> None:
    from evr1_train.data import row_to_inputs

    r = resampled
    trainer = _local_trainer(r, tmp_path, r["built"], r["limit"])
    assert [row["problem_id"] for row in trainer.train_rows] == ["v0", "long", "i2"]
    own = _own_plan(r, trainer.data_opts)
    media = own.media[0]
    configured = {k: v for k, v in r["rows"][1].items() if k != "evr1_plan"}
    assert _own_plan({**r, "rows": [r["rows"][0], configured]}, trainer.data_opts).total > r["limit"]
    inputs = row_to_inputs(trainer.train_rows[1], trainer.data_opts, 1)
    frames, meta = inputs.videos[0]
    assert frames.shape == (media.nframes, media.height, media.width, 3)
    assert list(meta["frames_indices"]) == list(media.frames_indices)
    prompt = trainer._prepare(1, trainer.train_rows[1], "u", None)
    assert int(prompt.encoded.input_ids.numel()) == own.total <= r["limit"]
    grid = prompt.encoded.vision["video_grid_thw"][0].tolist()
    assert grid == [media.nframes // 2, media.height // 14, media.width // 14]


def _local_trainer(r: dict[str, Any], out: Path, built: Any, limit: int) -> Any:
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from evr1_train.engine.config import LocalConfig
    from evr1_train.engine.trainer import LocalTrainer

    with initialize_config_module(config_module="evr1_train.conf", version_base=None):
        cfg = compose("evr1_trainer", overrides=[
            "+experiment=quickstart", f"engine.output_dir={out}", "engine.quickstart.enable=false",
            "engine.num_threads=1", "engine.loggers=[jsonl]", f"data.train_files={built}", "data.val_files=null",
            "data.train_batch_size=1", f"actor_rollout_ref.model.path={r['model']}", "actor_rollout_ref.rollout.n=2",
            "actor_rollout_ref.actor.ppo_mini_batch_size=1", f"data.max_prompt_length={limit}",
            "data.evr1.think=true"])  # fmt: skip  # the verl dataset's prompt: the limit was set for it
    OmegaConf.set_struct(cfg, False)
    node = _testenv("family_data").data_node("qwen2_5_vl", r["cache"])
    cfg.data.evr1.update({"cache_dir": node["cache_dir"], "media_root": str(r["media"]), "video": node["video"],
                          "image": node["image"]})  # fmt: skip
    return LocalTrainer(LocalConfig.from_cfg(cfg))


def _tampered(r: dict[str, Any], path: Path, plan: Any, ref: Any = None) -> Path:
    import json

    rows = [dict(row) for row in r["rows"]]
    rows[1]["evr1_plan"] = plan
    if ref is not None:
        rows[1]["video_cache"] = ref
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_tampered_row_spec_is_refused_naming_the_row(resampled: dict[str, Any], tmp_path: Path) -> None:
    """A spec the cache does not hold for the row, a malformed one, or (with the row's frames really cached under it)
    one that does not fit the limit: a clear error naming the row, on both engines, before step one."""
    from evr1_cache import build_cache
    from evr1_cache.plan import RowSpecError
    from evr1_train.data.plan_check import PromptTooLong

    r = resampled
    small = dict(r["rows"][1]["evr1_plan"]["video"])
    absent = _tampered(r, r["cache"] / "absent.jsonl", {"action": "resample", "video": {**small, "max_frames": 2}})
    with pytest.raises(RowSpecError, match=r"row long: its evr1_plan names video spec \w+, but .*long.mp4 is not in"):
        _verl_dataset(r, absent, r["limit"])
    with pytest.raises(RowSpecError, match="row long: its evr1_plan names video spec"):
        _local_trainer(r, tmp_path / "a", absent, r["limit"])
    broken = _tampered(r, r["cache"] / "broken.jsonl", {"action": "resample", "video": {**small, "max_frame": 2}})
    with pytest.raises(RowSpecError, match=r"row long: evr1_plan\.video is not a valid video spec"):
        _local_trainer(r, tmp_path / "b", broken, r["limit"])
    # the configured (too long) spec named as the row's own, its frames really cached under it
    full = build_cache(r["media"] / "plan.jsonl", r["cache"], r["spec"], r["opts"].image_spec(), progress=False,
                       output_data=tmp_path / "full.jsonl")  # fmt: skip
    assert full.ok
    ref = __import__("json").loads((tmp_path / "full.jsonl").read_text().splitlines()[1])["video_cache"]
    over = _tampered(r, r["cache"] / "over.jsonl", {"action": "resample", "video": r["spec"].to_dict()}, ref)
    with pytest.raises(PromptTooLong, match=r"row long: .* tokens .*under its own evr1_plan video spec"):
        _verl_dataset(r, over, r["limit"])
