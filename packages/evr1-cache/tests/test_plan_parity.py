"""The planner against the real thing: prompt lengths vs each family's transformers processor, and the activation
estimate vs the tensors autograd really saves in transformers' decoder.

1. For every supported family, rows with one or two videos, an image, both, or no media at all are planned by
   `evr1_cache.plan.plan_rows` (the tiny processor's chat template + tokenizer as the counter) and then fed, with
   frames of the planned size, to the family's real processor: the planner's count must equal `len(input_ids)` on
   every row. Half the videos carry the VideoMeta of the spec asked for (read as is), half one of another spec (the
   planner re-samples from the source geometry), so both paths are checked.
2. `activation_memory` vs the bytes of every tensor saved for backward (saved-tensor hooks, storages counted once,
   parameters excluded) in a tiny Qwen2 / Qwen3 causal LM in bf16 on CPU, for several micro-batch and length
   settings. Tolerance: 3% for sdpa attention on Qwen2 (the formula's own layer), 8% for eager attention (the s^2
   term leaves out small reshaped copies) and 20% for Qwen3 (per-head q/k norms the formula does not count).
   Not measured: gradient checkpointing (its own saved-tensor hooks hide the layer internals), the vision tower,
   GPU allocator overhead.

Runs in `nox -s spec_parity` (torch + transformers); elsewhere the module is skipped.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from evr1_cache.families import get_family
from evr1_cache.plan import HFTextCounter, ModelShape, activation_memory, plan_rows
from evr1_cache.spec import sample_frame_indices

ROOT = Path(__file__).resolve().parents[3]


def _need(name: str) -> ModuleType:
    if os.environ.get("EVR1_SPEC_PARITY") == "1":
        return importlib.import_module(name)
    return pytest.importorskip(name, reason=f"planner parity needs {name} (a torch env): run `nox -s spec_parity`")


torch = _need("torch")
transformers = _need("transformers")
np = _need("numpy")


def _tiny_vlm() -> Any:
    name = "evr1_testenv_tiny_vlm"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "testenv" / "tiny_vlm.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


#: (video spec settings, image spec settings) within the tiny processors' budgets (as test_family_parity.py).
CASES = {
    "qwen2_5_vl": (
        {"fps": 2.0, "min_frames": 2, "max_frames": 8, "min_pixels": 28 * 28 * 4, "max_pixels": 28 * 28 * 16},
        {"min_pixels": 3136, "max_pixels": 28 * 28 * 64},
    ),
    "qwen3_vl": (
        {"fps": 2.0, "min_frames": 2, "max_frames": 8, "min_pixels": 32 * 32 * 4, "max_pixels": 32 * 32 * 16},
        {"min_pixels": 4096, "max_pixels": 32 * 32 * 64},
    ),
    "qwen3_5": (
        {"fps": 2.0, "min_frames": 2, "max_frames": 8, "min_pixels": 32 * 32 * 4, "max_pixels": 32 * 32 * 16},
        {"min_pixels": 4096, "max_pixels": 32 * 32 * 64},
    ),
    "glm4v": (
        {"fps": 2.0, "min_pixels": 56 * 56, "total_pixels": 28 * 28 * 2 * 64},
        {"min_pixels": 56 * 56, "max_pixels": 2 * 28 * 28 * 64},
    ),
    "internvl": ({"size_factor": 56, "fps": None, "nframes": 5}, {"size_factor": 56}),
}
#: (total frames, native fps, height, width) of the source videos
VIDEOS = ((24, 8.0, 64, 96), (61, 29.97, 120, 90), (10, 4.0, 40, 200), (300, 25.0, 48, 48), (47, 23.976, 90, 160))
IMAGES = ((60, 80), (300, 120), (56, 56), (17, 400))
QUESTIONS = ("What happens?", "Compare <video> with <image>: which is brighter?", "Describe it.\nIn detail, please.")


def _rows(family: str, spec: Any, tmp: Path) -> list[dict[str, Any]]:
    from PIL import Image

    rows: list[dict[str, Any]] = []
    images = []
    for i, (h, w) in enumerate(IMAGES):
        path = tmp / f"img{i}.png"
        Image.new("RGB", (w, h), (i * 40, 10, 200)).save(path)
        images.append(str(path))

    def video(i: int, same_spec: bool) -> tuple[str, dict[str, Any]]:
        total, fps, h, w = VIDEOS[i]
        meta: dict[str, Any] = {"total_num_frames": total, "fps": fps, "duration": total / fps, "height": h, "width": w}
        if same_spec:
            fam = get_family(family)
            idx = sample_frame_indices(total, fps, spec)
            rh, rw = fam.resized_hw(h, w, len(idx), spec)
            meta.update(frames_indices=list(idx), resized_height=rh, resized_width=rw, spec_key=spec.key())
        else:
            meta.update(frames_indices=[0, 1], resized_height=28, resized_width=28, spec_key="0123456789abcdef")
        return f"clips/v{i}.mp4", {"file": "x", "meta": meta}

    for i in range(len(VIDEOS)):
        path, ref = video(i, i % 2 == 0)
        rows.append({"problem_id": f"v{i}", "problem": QUESTIONS[i % 3].replace("<image>", "it"), "videos": [path],
                     "video_cache": [ref]})  # fmt: skip
    for i, img in enumerate(images):
        rows.append({"problem_id": f"i{i}", "problem": "<image>How many squares?", "images": [img]})
    p0, r0 = video(0, True)
    p1, r1 = video(1, False)
    rows.append(
        {"problem_id": "vv", "problem": "<video>and<video>: same?", "videos": [p0, p1], "video_cache": [r0, r1]}
    )
    rows.append(
        {"problem_id": "vi", "problem": QUESTIONS[1], "videos": [p1], "video_cache": [r1], "images": [images[1]]}
    )
    rows.append({"problem_id": "t", "problem": "Just text, no media."})
    return rows


@pytest.fixture(scope="module")
def processors() -> dict[str, Any]:
    tiny = _tiny_vlm()
    return {name: tiny.PROCESSORS[name]() for name in CASES}


@pytest.mark.parametrize("name", list(CASES))
def test_planned_prompt_lengths_equal_the_processors_input_ids(processors, name, tmp_path):
    fam = get_family(name)
    proc = processors[name]
    video_settings, image_settings = CASES[name]
    spec, ispec = fam.video_spec(**video_settings), fam.image_spec(**image_settings)
    rows = _rows(name, spec, tmp_path)
    plans = plan_rows(rows, fam, spec, ispec, counter=HFTextCounter(proc), data_file=tmp_path / "d.jsonl")
    from evr1_cache.plan import default_messages

    rng = np.random.default_rng(0)
    mismatches = []
    for row, plan in zip(rows, plans, strict=True):
        assert plan.ok, (row["problem_id"], plan.error)
        assert plan.exact
        videos = [m for m in plan.media if m.kind == "video"]
        images = [m for m in plan.media if m.kind == "image"]
        text = proc.apply_chat_template(default_messages(row), tokenize=False, add_generation_prompt=True)
        kwargs: dict[str, Any] = {}
        if videos:
            kwargs["videos"] = [rng.integers(0, 256, (m.nframes, m.height, m.width, 3), dtype=np.uint8) for m in videos]
        if images:
            kwargs["images"] = [rng.integers(0, 256, (m.height, m.width, 3), dtype=np.uint8) for m in images]
        metas = [{**m.meta(), "duration": m.total_num_frames / m.fps, "height": m.native[2], "width": m.native[3]}
                 for m in videos]  # fmt: skip
        kwargs.update(fam.hf_kwargs(metas, ispec, images=bool(images)))
        ids = proc(text=[text], return_tensors="pt", **kwargs)["input_ids"][0]
        if len(ids) != plan.total:
            mismatches.append((row["problem_id"], plan.total, len(ids)))
        placeholders = int((ids == proc.tokenizer.convert_tokens_to_ids(fam.image_token)).sum())
        if name not in ("glm4v", "internvl"):
            placeholders += int((ids == proc.tokenizer.convert_tokens_to_ids(fam.video_token)).sum())
        assert placeholders == plan.vision, (row["problem_id"], placeholders, plan.vision)
    assert not mismatches, f"{name}: planner vs processor (row, planned, real): {mismatches}"
    bounds = plan_rows(rows, fam, spec, ispec, data_file=tmp_path / "d.jsonl")  # no tokenizer: an upper bound
    assert all(b.total >= p.total and b.vision == p.vision for b, p in zip(bounds, plans, strict=True))
    assert {m.source for p in plans for m in p.media} >= {"cache", "meta", "probe"}


# -- activation memory -------------------------------------------------------------------------------------------


def _saved_bytes(model: Any, ids: Any) -> int:
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t: Any) -> Any:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in params:
            seen.setdefault(ptr, storage.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logits = model(input_ids=ids).logits
        logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, ids[..., None])  # verl's log-prob of tokens
    logp.sum().backward()  # the saved tensors were really used
    return sum(seen.values())


@pytest.mark.parametrize(
    ("arch", "attention", "batch", "seq", "tolerance"),
    [
        ("qwen2", "sdpa", 1, 128, 0.03),
        ("qwen2", "sdpa", 2, 256, 0.03),
        ("qwen2", "sdpa", 3, 200, 0.03),
        ("qwen2", "eager", 2, 256, 0.08),
        ("qwen3", "sdpa", 2, 256, 0.20),
    ],
)
def test_activation_estimate_matches_the_saved_tensors(arch, attention, batch, seq, tolerance):
    sizes = {"hidden_size": 128, "intermediate_size": 352, "num_hidden_layers": 3, "num_attention_heads": 4,
             "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 4096}  # fmt: skip
    if arch == "qwen2":
        cfg = transformers.Qwen2Config(**sizes, attn_implementation=attention)
        model = transformers.Qwen2ForCausalLM(cfg)
    else:
        cfg = transformers.Qwen3Config(**sizes, head_dim=32, attn_implementation=attention)
        model = transformers.Qwen3ForCausalLM(cfg)
    torch.manual_seed(0)
    model = model.to(torch.bfloat16).train()
    ids = torch.randint(0, 1000, (batch, seq))
    measured = _saved_bytes(model, ids)
    shape = ModelShape.from_config(cfg.to_dict())
    estimate = activation_memory(shape, seq, batch, attention=attention).total
    assert abs(estimate - measured) / measured <= tolerance, (arch, attention, batch, seq, estimate, measured)


def test_sequence_parallel_and_checkpointing_shrink_the_estimate():
    shape = ModelShape.preset("qwen2_5_vl_7b")
    base = activation_memory(shape, 16384, 1)
    sp4 = activation_memory(shape, 16384, 1, 4)
    ckpt = activation_memory(shape, 16384, 1, checkpointing=True)
    assert sp4.total * 4 == pytest.approx(base.total, rel=1e-3)
    assert ckpt.layers < base.layers / 10
    assert activation_memory(shape, 16384, 2).total == pytest.approx(2 * base.total, rel=1e-3)
