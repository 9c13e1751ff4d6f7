"""The quickstart's tiny Qwen-VL builder: random init from config classes, in-process tokenizer, reload, forward."""

from __future__ import annotations

import json

import pytest

from evr1_train.quickstart.model import TinyVLMSpec, save_tiny_vlm


@pytest.mark.parametrize("arch", ["qwen2_5_vl", "qwen3_vl"])
def test_tiny_model_builds_reloads_and_generates(tmp_path, arch: str) -> None:
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    spec = TinyVLMSpec(arch=arch, hidden_size=64, intermediate_size=128, seed=3)
    folder = save_tiny_vlm(tmp_path / arch, spec, extra_corpus=["What colour is the square?"])
    assert (folder / "model.safetensors").exists()
    assert not list(folder.glob("*.bin"))
    assert json.loads((folder / "config.json").read_text())["model_type"] == arch
    proc = AutoProcessor.from_pretrained(folder)
    model = AutoModelForImageTextToText.from_pretrained(folder)
    tok = proc.tokenizer
    # every special id in the config comes from the tokenizer, and the answer format is a handful of tokens
    assert model.config.video_token_id == tok.convert_tokens_to_ids("<|video_pad|>")
    assert model.config.image_token_id == tok.convert_tokens_to_ids("<|image_pad|>")
    assert tok.eos_token == "<|im_end|>"
    assert model.generation_config.eos_token_id == tok.eos_token_id
    assert len(tok("<answer>B</answer>")["input_ids"]) <= 6
    assert tok.decode(tok("<answer>B</answer>")["input_ids"]) == "<answer>B</answer>"

    frames = torch.zeros(4, 56, 56, 3, dtype=torch.uint8)
    frames[:, 10:30, 10:30, 0] = 255
    meta = {"fps": 8.0, "frames_indices": [0, 4, 8, 12], "total_num_frames": 16, "duration": 2.0}
    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "What colour?"}]}]
    text = proc.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    inputs = proc(text=[text], videos=[frames], video_metadata=[meta], do_sample_frames=False, return_tensors="pt")
    n_video = int((inputs["input_ids"] == model.config.video_token_id).sum())
    assert n_video == int(inputs["video_grid_thw"].prod()) // 4 == 8  # 2 temporal x 2 x 2 merged patches
    out = model.generate(**inputs, max_new_tokens=3, do_sample=False)
    assert out.shape[1] == inputs["input_ids"].shape[1] + 3 or int(out[0, -1]) == tok.eos_token_id

    # the same spec gives the same weights; another seed gives others
    again = save_tiny_vlm(tmp_path / "again", spec, extra_corpus=["What colour is the square?"])
    other = save_tiny_vlm(tmp_path / "other", TinyVLMSpec(arch=arch, hidden_size=64, intermediate_size=128, seed=4))
    from safetensors.torch import load_file

    a, b, c = (load_file(str(f / "model.safetensors")) for f in (folder, again, other))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a if k in c and a[k].shape == c[k].shape)


def test_spec_validation_and_folder_reuse(tmp_path) -> None:
    with pytest.raises(ValueError, match="arch"):
        TinyVLMSpec(arch="llama")
    with pytest.raises(ValueError, match="multiple of 8"):
        TinyVLMSpec(hidden_size=48, num_heads=4)
    with pytest.raises(ValueError, match="unknown tiny-model keys"):
        TinyVLMSpec.from_mapping({"hidden": 64})
    spec = TinyVLMSpec(hidden_size=64, intermediate_size=128)
    folder = save_tiny_vlm(tmp_path / "m", spec)
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert save_tiny_vlm(tmp_path / "m", spec) == folder  # reused, not rebuilt
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    with pytest.raises(ValueError, match="different settings"):
        save_tiny_vlm(tmp_path / "m", TinyVLMSpec(hidden_size=64, intermediate_size=128, seed=1))


def test_the_test_environment_sizes_are_settings_of_the_same_builder(tmp_path) -> None:
    """testenv's vLLM-sized checkpoints come from this builder: bf16 weights, 2 vision heads, another tokenizer."""
    import torch

    from evr1_train.quickstart.model import tiny_vlm_model
    from evr1_train.quickstart.tokenizer import QWEN3_VL_CHAT_TEMPLATE, train_tiny_tokenizer

    spec = TinyVLMSpec(
        arch="qwen3_vl", hidden_size=64, num_heads=2, num_kv_heads=1, vision_num_heads=2, dtype="bfloat16"
    )
    tok = train_tiny_tokenizer([], vocab_size=400, chat_template=QWEN3_VL_CHAT_TEMPLATE)
    model = tiny_vlm_model(spec, tok)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert model.config.vision_config.num_heads == 2
    assert model.config.text_config.head_dim == 32
    assert model.config.video_token_id == tok.convert_tokens_to_ids("<|video_pad|>")
    with pytest.raises(ValueError, match="dtype must be 'float32' or 'bfloat16'"):
        TinyVLMSpec(dtype="float16")


def test_a_folder_from_before_the_new_settings_is_still_reused(tmp_path) -> None:
    spec = TinyVLMSpec(hidden_size=64, intermediate_size=128)
    folder = save_tiny_vlm(tmp_path / "m", spec)
    marker = folder / "evr1_tiny_vlm.json"
    old = {k: v for k, v in json.loads(marker.read_text()).items() if k not in ("vision_num_heads", "dtype")}
    marker.write_text(json.dumps(old))
    assert save_tiny_vlm(tmp_path / "m", spec) == folder  # the defaults of the new settings are what it was built with
    with pytest.raises(ValueError, match="different settings"):
        save_tiny_vlm(tmp_path / "m", TinyVLMSpec(hidden_size=64, intermediate_size=128, dtype="bfloat16"))
