"""The local engine's Qwen2.5-VL M-RoPE positions are verl's (`verl.models.transformers.qwen2_vl.get_rope_index`,
Qwen's reference rule, which vLLM's rollouts also use), not transformers 5's: after a video of several temporal
patches the text starts one past the video's largest position (see `evr1_cache.mrope`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


@pytest.mark.parametrize(("frames", "fps"), [(4, 2.0), (8, 2.0), (8, 4.0), (6, 3.0)])
def test_positions_equal_verls(tiny_vl: Path, frames: int, fps: float) -> None:
    import torch
    from verl.models.transformers.qwen2_vl import get_rope_index

    from evr1_train.engine.policy import load_policy, pick_runtime

    model, processor = load_policy(str(tiny_vl), pick_runtime("cpu"))
    assert model.config.vision_config.tokens_per_second == 2  # verl's function assumes Qwen2.5-VL's 2
    pixels = np.random.default_rng(frames).integers(0, 256, (frames, 56, 56, 3), dtype=np.uint8)
    meta = {"total_num_frames": frames, "fps": fps, "width": 56, "height": 56, "duration": frames / fps,
            "frames_indices": list(range(frames))}  # fmt: skip
    text = ("<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>How many?<|im_end|>\n"
            "<|im_start|>assistant\n")  # fmt: skip
    enc = processor(text=[text], videos=[pixels], video_metadata=[meta], do_sample_frames=False, fps=fps,
                    return_tensors="pt")  # fmt: skip
    assert int(enc["video_grid_thw"][0, 0]) > 1  # several temporal patches: where the two rules differ
    theirs = get_rope_index(processor, enc["input_ids"][0], video_grid_thw=enc["video_grid_thw"],
                            second_per_grid_ts=enc["second_per_grid_ts"], attention_mask=enc["attention_mask"][0])  # fmt: skip
    ours, _ = model.model.get_rope_index(
        enc["input_ids"], mm_token_type_ids=enc.get("mm_token_type_ids"), video_grid_thw=enc["video_grid_thw"],
        second_per_grid_ts=enc["second_per_grid_ts"], attention_mask=enc["attention_mask"],
    )  # fmt: skip
    assert torch.equal(ours[:, 0], theirs)
