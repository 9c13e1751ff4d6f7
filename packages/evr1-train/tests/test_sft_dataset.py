"""`Evr1SFTDataset` against verl 0.9.1's own `MultiTurnSFTDataset` (the class its SFT trainer uses by default)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.verl

RESPONSES = {
    "i1": "<answer>3</answer>",
    "t4": "<think>two and two</think><answer>4</answer>",
    "v0": "<answer>B</answer>",
}


@pytest.fixture(scope="module")
def sft_rows(video_data: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cache-built test rows with a response column; rows without one stay in (they are dropped)."""
    rows = [json.loads(x) for x in Path(video_data["built"]).read_text().splitlines()]
    for row in rows:
        row["response"] = RESPONSES.get(row["problem_id"], "")
    path = tmp_path_factory.mktemp("sft") / "sft.evr1.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _config(video_data: dict, budgets: tuple, pad_mode: str, **kw: Any) -> Any:
    from omegaconf import OmegaConf

    video, image = budgets
    evr1 = {"cache_dir": str(video_data["cache"]), "video_source": "cache_only", "video": video, "image": image}
    return OmegaConf.create(
        {
            "pad_mode": pad_mode,
            "max_length": 512,
            "truncation": "error",
            "messages_key": "messages",
            "response_key": "response",
            "evr1": {**evr1, "media_root": str(video_data["root"])},
            **kw,
        }
    )


@pytest.mark.parametrize("pad_mode", ["no_padding", "right"])
def test_items_equal_verls_multiturn_sft_dataset(
    video_data: dict, budgets: tuple, tiny_vl: Path, sft_rows: Path, tmp_path: Path, pad_mode: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Same conversation (evr1's prompt text with its <image> placeholder + the response), same image: verl's class and
    ours give the same input ids, loss mask, position ids (M-RoPE) and pixels."""
    import pandas as pd
    from transformers import AutoProcessor, AutoTokenizer
    from verl.utils.dataset import multiturn_sft_dataset as verl_sft

    from evr1_train.data import DataOptions, build_prompt_text, row_to_inputs
    from evr1_train.data.sft_dataset import Evr1SFTDataset

    tok, proc = AutoTokenizer.from_pretrained(tiny_vl), AutoProcessor.from_pretrained(tiny_vl)
    cfg = _config(video_data, budgets, pad_mode)
    ours = Evr1SFTDataset(str(sft_rows), tok, cfg, processor=proc)
    assert [r["problem_id"] for r in ours.rows] == ["v0", "i1", "t4"]  # rows without a response are dropped
    assert len(ours) == 3
    opts = DataOptions.from_mapping(cfg.evr1)
    # verl reads Parquet `messages`; its images go through process_image, which here hands over evr1's image so
    # both classes see the same pixels (the comparison is of the conversation encoding, not of two resizers)
    served: list[Any] = []
    monkeypatch.setattr(verl_sft, "process_image", lambda image, image_patch_size=14: served.pop(0))
    for i, row in enumerate(ours.rows):
        if row.get("videos"):
            continue  # verl decodes videos itself (qwen-vl-utils): covered by the cached-frames test below
        images = row_to_inputs(row, opts).images
        served[:] = list(images)
        frame = pd.DataFrame(
            [
                {
                    "messages": [
                        {"role": "user", "content": build_prompt_text(row, opts)},
                        {"role": "assistant", "content": row["response"]},
                    ],
                    "images": [{"image": "served"} for _ in images],
                }
            ]
        )
        parquet = tmp_path / f"verl_{i}.parquet"
        frame.to_parquet(parquet)
        ref = verl_sft.MultiTurnSFTDataset(str(parquet), tok, cfg, processor=proc)[0]
        got = ours[i]
        assert sorted(got) == sorted(ref), row["problem_id"]
        for key in ("input_ids", "loss_mask", "position_ids", "attention_mask"):
            if key in ref:
                assert torch.equal(got[key], ref[key]), (row["problem_id"], key)
        if "multi_modal_inputs" in ref:
            for key, value in ref["multi_modal_inputs"].items():
                assert torch.equal(got["multi_modal_inputs"][key], value), (row["problem_id"], key)
        trained = tok.decode(got["input_ids"][got["loss_mask"].bool()])
        assert trained.startswith(row["response"])
        assert "<|im_end|>" in trained


def test_videos_come_from_the_cache_with_their_timestamps(video_data: dict, budgets: tuple, tiny_vl: Path,
                                                           sft_rows: Path) -> None:  # fmt: skip
    from transformers import AutoProcessor, AutoTokenizer
    from verl.utils.dataset.dataset_utils import SFTTensorCollator

    from evr1_train.data import DataOptions
    from evr1_train.data.sft_dataset import Evr1SFTDataset
    from evr1_train.engine.batch import encode_prompt

    tok, proc = AutoTokenizer.from_pretrained(tiny_vl), AutoProcessor.from_pretrained(tiny_vl)
    cfg = _config(video_data, budgets, "no_padding")
    ds = Evr1SFTDataset(str(sft_rows), tok, cfg, processor=proc)
    item = ds[0]  # v0: a cached video
    # the prompt part is token for token what RL and the local engine encode for the same row
    from evr1_train.data import row_to_inputs

    inputs = row_to_inputs(ds.rows[0], DataOptions.from_mapping(cfg.evr1))
    prompt = encode_prompt(proc, inputs.messages, inputs.images, inputs.videos)
    n = prompt.length
    assert torch.equal(item["input_ids"][:n], prompt.input_ids)
    assert int(item["loss_mask"][:n].sum()) == 0
    assert int(item["loss_mask"][n:].sum()) == len(item["input_ids"]) - n
    assert torch.equal(item["multi_modal_inputs"]["pixel_values_videos"], prompt.vision["pixel_values_videos"])
    assert item["position_ids"].shape == (4, len(item["input_ids"]))
    batch = SFTTensorCollator("no_padding")([ds[0], ds[1]])  # verl's own collator takes the items
    assert "input_ids" in batch
    with pytest.raises(ValueError, match=r"longer than data\.max_length"):
        Evr1SFTDataset(str(sft_rows), tok, _config(video_data, budgets, "right", max_length=8), processor=proc)[0]


@pytest.mark.parametrize("model", ["qwen2_5_vl_7b", "qwen3_vl_8b"])
def test_sft_presets_compose_on_verls_sft_config_and_build_the_dataset(
    model: str, video_data: dict, budgets: tuple, tiny_vl: Path, sft_rows: Path
) -> None:
    """`evr1-train sft +sft_experiment=...` composes on verl's sft_trainer_engine; verl's own dataset factory builds
    Evr1SFTDataset from it; the checkpoint config keeps an HF folder (what RL loads); verl's config dataclasses take
    the model, optimiser and checkpoint nodes."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf
    from transformers import AutoProcessor, AutoTokenizer
    from verl.trainer.sft_trainer import create_sft_dataset
    from verl.utils.config import omega_conf_to_dataclass

    video, image = budgets
    with initialize_config_module(config_module="evr1_train.conf", version_base=None):
        cfg = compose(
            "evr1_sft",
            overrides=[
                f"+sft_experiment={model}",
                f"data.train_files={sft_rows}",
                f"data.evr1.cache_dir={video_data['cache']}",
                "data.evr1.video_source=cache_only",
                "data.response_key=response",
                "data.max_length=512",
            ],
        )
    assert cfg.trainer.experiment_name == f"{model}_sft"
    assert "hf_model" in cfg.checkpoint.save_contents
    assert cfg.data.custom_cls.name == "Evr1SFTDataset"
    omega_conf_to_dataclass(cfg.checkpoint)
    omega_conf_to_dataclass(cfg.optim)
    # verl's own factory, with the test cache's budgets (the presets' are for real models)
    with open_dict(cfg):
        cfg.data.evr1.video = video
        cfg.data.evr1.image = image
        cfg.data.evr1.media_root = str(video_data["root"])
    OmegaConf.resolve(cfg)
    tok, proc = AutoTokenizer.from_pretrained(tiny_vl), AutoProcessor.from_pretrained(tiny_vl)
    ds = create_sft_dataset(cfg.data.train_files, cfg.data, tok, proc)
    assert type(ds).__name__ == "Evr1SFTDataset"
    assert len(ds) == 3
    assert int(ds[1]["loss_mask"].sum()) > 0


def open_dict(cfg: Any) -> Any:
    from omegaconf import open_dict as od

    return od(cfg)
