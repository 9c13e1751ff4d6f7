"""`Evr1Dataset` against verl's real RLHFDataset machinery, collate_fn and the processor path the agent loop uses."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.verl


def _data_cfg(video_data: dict, budgets: tuple, **kw: object):
    from omegaconf import OmegaConf

    video, image = budgets
    cfg = {
        "custom_cls": {"path": "pkg://evr1_train.data.dataset", "name": "Evr1Dataset"},
        "prompt_key": "problem",
        "max_prompt_length": 4096,
        "filter_overlong_prompts": False,
        "filter_overlong_prompts_workers": 0,  # 0 = in-process; datasets forks a pool for >= 1 (fork + torch can hang)
        "truncation": "error",
        "return_raw_chat": True,
        "evr1": {"cache_dir": str(video_data["cache"]), "video_source": "cache_only", "video": video, "image": image},
    }
    cfg.update(kw)
    return OmegaConf.create(cfg)


def _load(tiny_vl):
    from transformers import AutoProcessor, AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_vl), AutoProcessor.from_pretrained(tiny_vl)


def test_items_collate_and_reward_inputs(video_data: dict, budgets: tuple, tiny_vl) -> None:
    from verl.utils.dataset.rl_dataset import collate_fn, get_dataset_class

    tok, proc = _load(tiny_vl)
    cfg = _data_cfg(video_data, budgets)
    cls = get_dataset_class(cfg)
    assert cls.__name__ == "Evr1Dataset"
    ds = cls(str(video_data["built"]), tok, cfg, processor=proc)
    assert len(ds) == 5
    item = ds[0]
    assert item["reward_model"] == {"style": "rule", "ground_truth": "B"}
    assert item["extra_info"]["problem_type"] == "multiple_choice"
    assert item["extra_info"]["options"] == ["A. red", "B. green", "C. blue", "D. white"]
    assert item["evr1_offline_text"].endswith("<answer>B</answer>")
    assert ds[1]["evr1_offline_text"] == ""
    content = item["raw_prompt"][-1]["content"]
    assert [c["type"] for c in content] == ["text", "video", "text"]  # the placeholder stays where the row put it
    assert content[1]["video"].endswith("v0.mp4")
    batch = collate_fn([ds[i] for i in range(len(ds))])
    assert batch["dummy_tensor"].shape == (5, 1)
    assert len(batch["raw_prompt"]) == 5
    assert [e["index"] for e in batch["extra_info"]] == [0, 1, 2, 3, 4]


def test_pixels_reach_the_processor_as_cached_frames(video_data: dict, budgets: tuple, tiny_vl) -> None:
    """The classmethod verl's agent loop calls returns (uint8 [T,C,H,W], metadata); the processor honours it."""
    from verl.utils.dataset.rl_dataset import get_dataset_class
    from verl.utils.tokenizer import build_multimodal_processor_inputs

    tok, proc = _load(tiny_vl)
    cfg = _data_cfg(video_data, budgets)
    cls = get_dataset_class(cfg)
    ds = cls(str(video_data["built"]), tok, cfg, processor=proc)
    messages = ds[2]["raw_prompt"]  # image + video row
    images, videos, audios = asyncio.run(cls.process_multi_modal_info(messages, image_patch_size=14, config=cfg))
    assert audios is None
    assert len(images) == 1
    assert len(videos) == 1
    frames, meta = videos[0]
    assert frames.dtype == torch.uint8
    assert frames.shape[1] == 3
    assert frames.shape[0] % 2 == 0
    assert meta["fps"] == pytest.approx(8.0)
    assert len(meta["frames_indices"]) == frames.shape[0]
    text = proc.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    # data.mm_processor_kwargs of evr1's config: the cached frames are already sized, the processor must not resize
    kwargs = {"do_resize": False}
    out = build_multimodal_processor_inputs(proc, text=[text], images=images, videos=videos, mm_processor_kwargs=kwargs)
    t, h, w = out["video_grid_thw"][0].tolist()
    assert t == frames.shape[0] // 2
    assert h * 14 == frames.shape[2]
    assert w * 14 == frames.shape[3]
    n_video_tokens = int((out["input_ids"] == proc.tokenizer.convert_tokens_to_ids("<|video_pad|>")).sum())
    assert n_video_tokens == t * h * w // 4
    ih, iw = out["image_grid_thw"][0].tolist()[1:]
    assert (ih * 14, iw * 14) == (images[0].height, images[0].width)


def test_rows_with_unusable_media_are_dropped_with_a_reason(
    video_data: dict, budgets: tuple, tiny_vl, tmp_path
) -> None:
    from verl.utils.dataset.rl_dataset import get_dataset_class

    rows = [json.loads(line) for line in video_data["built"].read_text().splitlines()]
    bad = {**rows[0], "problem_id": "gone9", "videos": ["clips/missing.mp4"], "video_cache": [None]}
    data = tmp_path / "with_bad.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in [*rows, bad]))
    tok, proc = _load(tiny_vl)
    cfg = _data_cfg(video_data, budgets)
    cfg.evr1.media_root = str(video_data["root"])
    ds = get_dataset_class(cfg)(str(data), tok, cfg, processor=proc)
    assert len(ds) == 5
    assert any("gone9" in line and "missing.mp4" in line for line in ds.dropped_rows)


def test_verl_length_filter_runs_through_our_classmethod(video_data: dict, budgets: tuple, tiny_vl) -> None:
    """verl's own overlong-prompt filter (processor + our pixels) keeps short prompts and drops long ones."""
    from verl.utils.dataset.rl_dataset import get_dataset_class

    tok, proc = _load(tiny_vl)
    keep = _data_cfg(video_data, budgets, filter_overlong_prompts=True, max_prompt_length=4096)
    assert len(get_dataset_class(keep)(str(video_data["built"]), tok, keep, processor=proc)) == 5
    tight = _data_cfg(video_data, budgets, filter_overlong_prompts=True, max_prompt_length=120)
    kept = get_dataset_class(tight)(str(video_data["built"]), tok, tight, processor=proc)
    lengths = [len(np.asarray(kept[i]["raw_prompt"], dtype=object)) for i in range(len(kept))]
    assert 0 < len(kept) < 5
    assert all(n >= 1 for n in lengths)
    assert "t4" in [kept.dataframe[i]["problem_id"] for i in range(len(kept))]  # the text-only row is short
