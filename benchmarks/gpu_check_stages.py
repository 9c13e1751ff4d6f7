"""The stages of benchmarks/gpu_check.py, each run in its own process: `python gpu_check_stages.py STAGE --json OUT ...`.

setup: what the machine and the carried packages are (GPU, torch, transformers, peft, attention kernel).
cache: rows over the real clips + `evr1_cache.build_cache` at the seed's pixel budgets (up to 256 frames).
train_<size>: a random-weight Qwen3-VL of the published shape (`gpu_check.MODELS`) in the local engine: the training
    step cached vs decoded (per phase, tokens/s), then peak memory per setting (full, LoRA, frozen vision tower)
    against the planner's estimate (`evr1_cache.plan.activation_memory`) plus the weights / gradients / AdamW
    states counted from the model. A setting predicted not to fit the GPU is skipped and says so.
eval_<size>: evr1-eval's HF backend over the clips, frames from the cache vs decoded.

The model is never written for training: the engine's `load_policy` is replaced, in this process only, by one that
builds the architecture from the folder's config.json with random weights straight on the device (an 8B checkpoint
would cost a 16 GB write and read). The eval stage saves the 2B model in bf16, as a user's checkpoint would be.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gpu_check as gc_plan  # noqa: E402  (the stdlib half: shapes, workload, schema)

PHASES = ("data", "rollout", "log_prob", "update", "step")
SETTINGS = ("full", "lora", "frozen_vision")
GIB = 2**30


def write_json(path: Path, data: dict[str, Any]) -> None:
    from evr1_cache.atomic import atomic_text as write_text

    write_text(path, json.dumps(data, indent=1))


def attention() -> tuple[str, str]:
    """flash-attn when importable on a CUDA machine, else PyTorch SDPA (and why)."""
    import torch

    if not torch.cuda.is_available():
        return "sdpa", "CPU: PyTorch SDPA"
    if importlib.util.find_spec("flash_attn") is not None:
        return "flash_attention_2", "flash-attn installed"
    return "sdpa", "flash-attn not installed: falls back to PyTorch SDPA"


# -- setup --------------------------------------------------------------------------------------------------------------
def stage_setup(args: argparse.Namespace) -> dict[str, Any]:
    import peft
    import torch
    import transformers
    from verl.trainer.ppo import core_algos  # noqa: F401

    import evr1_eval.backends.hf  # noqa: F401  (the eval stage's backend imports with what travelled)
    import evr1_train.engine.trainer  # noqa: F401

    cuda = torch.cuda.is_available()
    attn, note = attention()
    info = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if cuda else "none (CPU)",
        "gpu_memory_gib": torch.cuda.get_device_properties(0).total_memory / GIB if cuda else 0.0,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
        "attention": attn,
        "attention_note": note,
    }
    print(json.dumps(info))
    return info


# -- cache ---------------------------------------------------------------------------------------------------------------
def video_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The seed's video settings: the qwen3_vl_8b preset's pixel budgets, up to `frames` frames at `fps`."""
    work = workload(args)
    if args.tiny:
        return {"fps": work.fps, "nframes": None, "min_frames": 4, "max_frames": work.frames, "min_pixels": 4096,
                "max_pixels": 4096, "total_pixels": None, "size_factor": 32}  # fmt: skip
    return {**gc_plan.seed_video_budget(), "fps": work.fps, "nframes": None, "min_frames": 4, "max_frames": work.frames}


def workload(args: argparse.Namespace) -> gc_plan.Workload:
    return gc_plan.Workload(**json.loads(args.workload))


def rows(videos: list[Path], count: int) -> list[dict[str, Any]]:
    """Multiple-choice rows cycling over the clips (paths relative to the media root)."""
    out = []
    for i in range(count):
        v = videos[i % len(videos)]
        answer = chr(65 + i % 4)
        out.append(
            {
                "problem_id": f"gpu-{i}",
                "problem": "<video>Which letter names this clip?",
                "options": [f"{chr(65 + j)}. {videos[j % len(videos)].stem}" for j in range(4)],
                "answer": answer,
                "problem_type": "multiple choice",
                "videos": [v.name],
                "data_source": "real",
            }
        )
    return out


def stage_cache(args: argparse.Namespace) -> dict[str, Any]:
    from evr1_cache import CacheReader, ImageSpec, SamplingSpec, build_cache
    from evr1_cache.atomic import atomic_text as write_text

    work = Path(args.work)
    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    videos = [Path(args.videos) / name for name in gc_plan.CLIPS]
    missing = [str(v) for v in videos if not v.is_file()]
    if missing:
        raise SystemExit(f"missing real clips {missing}: run `python3 benchmarks/gpu_check.py --prepare`")
    n_rows = 12
    write_text(data / "train.jsonl", "".join(json.dumps(r) + "\n" for r in rows(videos, n_rows)))
    spec = SamplingSpec(**video_spec(args))
    t0 = time.perf_counter()
    report = build_cache(
        data / "train.jsonl",
        work / "cache",
        spec,
        ImageSpec(min_pixels=4096, max_pixels=1310720, size_factor=32),
        media_root=Path(args.videos),
        progress=False,
        output_data=data / "train.evr1.jsonl",
    )
    seconds = time.perf_counter() - t0
    reader = CacheReader(work / "cache")
    frames = {v.name: int(reader.entry(v, spec).frames.shape[0]) for v in videos}
    shapes = {v.name: list(reader.entry(v, spec).frames.shape[1:3]) for v in videos}
    print(f"cache built in {seconds:.1f} s ({report.built} videos): frames {frames}, frame sizes {shapes}")
    return {"videos": [v.name for v in videos], "frames": frames, "frame_hw": shapes, "build_s": seconds}


# -- the model ------------------------------------------------------------------------------------------------------------
def model_folder(args: argparse.Namespace, work: Path) -> Path:
    """An HF folder holding the published shape's config.json and a Qwen3-VL processor, no weights: the quickstart's
    tokenizer (no download) with Qwen3-VL's chat template, the seed's pixel budgets."""
    from transformers import Qwen3VLConfig

    from evr1_train.quickstart.model import TinyVLMSpec, build_tiny_vlm

    folder = work / f"model-{args.model}{'-tiny' if args.tiny else ''}"
    if (folder / "config.json").is_file():
        return folder
    spec = video_spec(args)
    low, high = spec["min_pixels"], spec["max_pixels"]
    tiny, processor = build_tiny_vlm(
        TinyVLMSpec(
            arch="qwen3_vl", video_min_pixels=low, video_max_pixels=high, image_min_pixels=4096, image_max_pixels=high
        )
    )
    shape = gc_plan.TINY_MODEL if args.tiny else gc_plan.MODELS[args.model]
    ids = {k: getattr(tiny.config, k) for k in ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")}  # fmt: skip
    tok = processor.tokenizer
    text = {**shape["text_config"], "bos_token_id": tok.pad_token_id, "eos_token_id": tok.eos_token_id,
            "pad_token_id": tok.pad_token_id, "tie_word_embeddings": shape["tie_word_embeddings"]}  # fmt: skip
    config = Qwen3VLConfig(text_config=text, vision_config=shape["vision_config"],
                           tie_word_embeddings=shape["tie_word_embeddings"], **ids)  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    processor.save_pretrained(folder)
    tiny.generation_config.save_pretrained(folder)
    config.save_pretrained(folder)
    return folder


def random_weights_loader(attn: str) -> Any:
    """A stand-in for `evr1_train.engine.policy.load_policy`: the architecture of the folder's config.json with random
    weights, built on the device in fp32 (the engine's master weights), gradient checkpointing on (as verl's presets)."""
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor

    def load(path: str, runtime: Any, key: str = "actor_rollout_ref.model.path") -> tuple[Any, Any]:
        processor = AutoProcessor.from_pretrained(path)
        config = AutoConfig.from_pretrained(path)
        torch.manual_seed(0)
        with torch.device(runtime.device):
            model = AutoModelForImageTextToText.from_config(config, dtype=torch.float32, attn_implementation=attn)
        model.config.use_cache = True
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return model, processor

    return load


# -- train ------------------------------------------------------------------------------------------------------------------
def compose(args: argparse.Namespace, folder: Path, mode: str, setting: str) -> Any:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from omegaconf import OmegaConf

    work, w = Path(args.work), workload(args)
    video = ", ".join(f"{k}: {'null' if v is None else v}" for k, v in video_spec(args).items())
    device, dtype = ("cpu", "float32") if args.tiny else ("cuda", "bfloat16")
    overrides = [
        "+experiment=quickstart_qwen3_vl",
        f"engine.output_dir={work / f'run-{args.model}-{mode}-{setting}'}",
        f"engine.device={device}", f"engine.dtype={dtype}", "engine.resume=disable", "engine.loggers=[jsonl]",
        "engine.plot=false", "trainer.val_before_train=false", "evr1.hybrid.enable=false",
        f"actor_rollout_ref.model.path={folder}",
        f"data.train_files={work / 'data' / 'train.evr1.jsonl'}", f"data.val_files={work / 'data' / 'train.evr1.jsonl'}",
        f"data.evr1.cache_dir={work / 'cache'}", f"data.evr1.media_root={work / 'data'}",  # paths: relative to the rows' file
        "data.evr1.allow_outside_media=true",  # the carried clips lie outside the rows' folder
        f"data.evr1.video_source={mode}", f"data.evr1.video={{{video}}}",
        f"data.train_batch_size={w.prompts}", f"actor_rollout_ref.rollout.n={w.n}",
        f"data.max_response_length={w.response}", "data.max_prompt_length=40960",
        "actor_rollout_ref.actor.ppo_mini_batch_size=1",  # 2 mini-batches: the old-log-prob pass runs, as in verl
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.actor.use_kl_loss=true",  # the reference forward runs (a copy, or LoRA's base in the actor)
    ]  # fmt: skip
    if setting == "lora":
        overrides.append("+evr1_lora=language")
    elif setting == "frozen_vision":
        overrides.append("evr1.frozen_modules=[vision_tower]")
    with initialize_config_module(config_module="evr1_train.conf", version_base=None):
        cfg = hydra_compose("evr1_trainer", overrides=overrides)
    OmegaConf.resolve(cfg)
    cfg.engine.quickstart.enable = False
    return cfg


@contextlib.contextmanager
def phase_peaks(peaks: dict[str, float]) -> Iterator[None]:
    """Peak CUDA memory per step phase (the engine's `StepTimer.phase` wrapped in this process): reset at each phase's
    start, read at its end."""
    import torch

    from evr1_train.engine.base import StepTimer

    original = StepTimer.phase

    @contextlib.contextmanager
    def phase(self: Any, name: str) -> Iterator[None]:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        with original(self, name):
            yield
        if torch.cuda.is_available():
            torch.cuda.synchronize()
            peaks[name] = max(peaks.get(name, 0.0), torch.cuda.max_memory_allocated() / GIB)

    StepTimer.phase = phase  # type: ignore[method-assign]
    try:
        yield
    finally:
        StepTimer.phase = original  # type: ignore[method-assign]


def make_trainer(args: argparse.Namespace, folder: Path, mode: str, setting: str, attn: str) -> Any:
    import evr1_train.engine.base as base
    import evr1_train.engine.trainer as trainer_mod
    from evr1_train.engine.config import LocalConfig

    loader = random_weights_loader(attn)
    base.load_policy = loader  # type: ignore[assignment]
    trainer_mod.load_policy = loader  # type: ignore[assignment]
    trainer = trainer_mod.LocalTrainer(LocalConfig.from_cfg(compose(args, folder, mode, setting)))
    tokens: list[int] = []
    collect = trainer._collect

    def counting(step: int, timer: Any) -> Any:
        prompts, seqs, metrics = collect(step, timer)
        tokens.append(sum(prompts[s.prompt].encoded.length + len(s.response) for s in seqs))
        return prompts, seqs, metrics

    trainer._collect = counting
    trainer.gpu_check_tokens = tokens
    return trainer


def release(*objs: Any) -> None:
    import torch

    del objs
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def timed_steps(trainer: Any, steps: int) -> tuple[dict[str, float], float, int]:
    """Phase medians over `steps` steps after one warm-up step; tokens/s; the longest prompt seen."""
    trainer.step()
    per: dict[str, list[float]] = {p: [] for p in PHASES}
    tps = []
    for _ in range(steps):
        m = trainer.step()
        for p in PHASES:
            per[p].append(m.get(f"timing_s/{p}", 0.0))
        tps.append(trainer.gpu_check_tokens[-1] / m["timing_s/step"])
    return {p: statistics.median(v) for p, v in per.items()}, statistics.median(tps), max(trainer.gpu_check_tokens)


def static_bytes(trainer: Any) -> dict[str, int]:
    """Weights (fp32), gradients and AdamW moments of the trainable parameters, and the reference copy, from the
    model's real parameter counts: what the planner's activation estimate comes on top of."""
    params = list(trainer.model.parameters())
    total = sum(p.numel() for p in params)
    trainable = sum(p.numel() for p in params if p.requires_grad)
    ref = sum(p.numel() for p in trainer.ref_model.parameters()) if trainer.ref_model is not None else 0
    return {"weights": 4 * total, "grads": 4 * trainable, "adam": 8 * trainable, "ref": 4 * ref,
            "parameters": total, "trainable": trainable}  # fmt: skip


def predicted(shape: dict[str, Any], setting: str, seq_len: int, vision_tokens: int, static: dict[str, int], attn: str) -> dict[str, float]:  # fmt: skip
    """The planner's activation estimate for this setting (vision tower counted only when it trains) + static."""
    from evr1_cache.plan import ModelShape, activation_memory

    est = activation_memory(
        ModelShape.from_config(shape),
        seq_len,
        1,
        1,
        checkpointing=True,
        attention="flash" if attn == "flash_attention_2" else "sdpa",
        vision_tokens=0 if setting == "frozen_vision" else vision_tokens,
    )
    fixed = static["weights"] + static["grads"] + static["adam"] + static["ref"]
    return {"activations": est.total / GIB, "static": fixed / GIB, "total": (est.total + fixed) / GIB}


def static_for(shape: dict[str, Any], setting: str) -> dict[str, int]:
    """`static_bytes` before building (from the config's parameter count), to skip settings that cannot fit."""
    counts = gc_plan.parameter_count(shape)
    total = counts["language"] + counts["vision"]
    trainable = {"full": total, "frozen_vision": counts["language"], "lora": total // 100}[setting]
    ref = total if setting != "lora" else 0
    return {"weights": 4 * total, "grads": 4 * trainable, "adam": 8 * trainable, "ref": 4 * ref,
            "parameters": total, "trainable": trainable}  # fmt: skip


def measure_memory(args: argparse.Namespace, trainer: Any, shape: dict[str, Any], setting: str, seq_len: int, vtok: int, attn: str) -> dict[str, Any]:  # fmt: skip
    """One more step with per-phase peaks: measured peak (the update's, where activations are held) vs predicted."""
    import torch

    static = static_bytes(trainer)
    pred = predicted(shape, setting, seq_len, vtok, static, attn)
    peaks: dict[str, float] = {}
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        with phase_peaks(peaks):
            trainer.step()
        start = (static["weights"] + static["adam"] + static["ref"]) / GIB
        peak = peaks["update"]  # what the planner predicts: the backward pass (rollout's KV cache: phase_peak_gib)
    else:  # CPU (the dry run): live tensor bytes over the step (torch's profiler), on top of the counted state
        from evr1_train.engine.memory import tensor_peak

        _, tp = tensor_peak(trainer.step)
        start = (static["weights"] + static["adam"] + static["ref"]) / GIB
        peak = start + tp.peak / GIB
        peaks["step"] = peak
    measured_act = max(0.0, peak - start - static["grads"] / GIB)
    return {
        "setting": setting, "status": "ok", "predicted_gib": pred["total"], "measured_gib": peak,
        "ratio": pred["total"] / peak if peak else 0.0, "activations_predicted_gib": pred["activations"],
        "activations_measured_gib": measured_act, "static_gib": pred["static"], "phase_peak_gib": peaks,
        "parameters": static["parameters"], "trainable": static["trainable"],
    }  # fmt: skip


def stage_train(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    work, w = Path(args.work), workload(args)
    shape = gc_plan.TINY_MODEL if args.tiny else gc_plan.MODELS[args.model]
    attn, _ = attention()
    folder = model_folder(args, work)
    capacity = torch.cuda.get_device_properties(0).total_memory / GIB if torch.cuda.is_available() else float("inf")
    vtok = gc_plan.video_tokens(w.frames, shape) if not args.tiny else 64
    seq_guess = vtok + 128 + w.response
    fits = {s: predicted(shape, s, seq_guess, vtok, static_for(shape, s), attn)["total"] < 0.92 * capacity for s in SETTINGS}  # fmt: skip
    timing = "full" if fits["full"] else "lora"
    print(f"{args.model}: predicted to fit {fits}; timing setting {timing}", flush=True)
    result: dict[str, Any] = {"model": args.model, "timing_setting": timing, "memory": [], "tokens_per_s": {}}
    counts = gc_plan.parameter_count(shape)
    result["parameters"] = {**counts, "total": counts["language"] + counts["vision"]}
    longest = 0
    for mode, key in (("cache_only", "cached"), ("decode", "decoded")):
        trainer = make_trainer(args, folder, mode, timing, attn)
        t0 = time.perf_counter()
        result[key], result["tokens_per_s"][key], longest = timed_steps(trainer, w.timed_steps)
        print(f"{key}: {result[key]} ({time.perf_counter() - t0:.1f} s)", flush=True)
        if mode == "cache_only":
            result["memory"].append(measure_memory(args, trainer, shape, timing, longest, vtok, attn))
        release(trainer)
    result["ratio"] = {p: (result["decoded"][p] / result["cached"][p] if result["cached"][p] else 0.0) for p in PHASES}
    result["longest_sequence"] = longest
    for setting in SETTINGS:
        if setting == timing:
            continue
        pred = predicted(shape, setting, longest, vtok, static_for(shape, setting), attn)
        if not fits[setting]:
            result["memory"].append({"setting": setting, "status": "skipped", "predicted_gib": pred["total"],
                                     "reason": f"predicted {pred['total']:.0f} GiB > {capacity:.0f} GiB on the GPU"})  # fmt: skip
            continue
        trainer = make_trainer(args, folder, "cache_only", setting, attn)
        trainer.step()  # warm-up: the optimiser state exists from here on
        result["memory"].append(measure_memory(args, trainer, shape, setting, longest, vtok, attn))
        release(trainer)
    return result


# -- eval ---------------------------------------------------------------------------------------------------------------
def stage_eval(args: argparse.Namespace) -> dict[str, Any]:
    """Save the model (bf16, random weights), precompute the cache as a user would, run evr1-eval's HF backend twice."""
    import subprocess

    import torch

    work, w = Path(args.work), workload(args)
    folder = model_folder(args, work)
    ckpt = work / f"eval-{args.model}{'-tiny' if args.tiny else ''}"
    if not (ckpt / "config.json").is_file():
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # random init is slow on a CPU
        model, processor = random_weights_loader("sdpa")(str(folder), argparse.Namespace(device=device))
        model.to(torch.bfloat16).save_pretrained(ckpt)
        processor.save_pretrained(ckpt)
        release(model)
    ann = work / "eval_annotations"
    ann.mkdir(exist_ok=True)
    videos = [Path(args.videos) / name for name in gc_plan.CLIPS]
    (ann / "evr1_data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows(videos, w.eval_samples)))
    spec = video_spec(args)
    sampling = [a for k, v in spec.items() if v is not None for a in ("--sampling", f"{k}={v}")]
    common = ["--annotations-dir", str(ann), "--media-root", str(args.videos)]
    cli = [sys.executable, "-m", "evr1_eval.cli"]
    cache = work / "eval_cache"
    subprocess.run([*cli, "precompute", "evr1_data", *common, "--cache-dir", str(cache), "--model", str(ckpt),
                    *sampling, "--no-progress"], check=True)  # fmt: skip
    device, dtype = ("cpu", "float32") if args.tiny else ("cuda", "bfloat16")
    seconds = {}
    for name, extra in (("cached", ["--cache-dir", str(cache)]), ("decoded", [])):
        out = work / f"eval-run-{name}"
        subprocess.run(["rm", "-rf", str(out)], check=True)
        t0 = time.perf_counter()
        subprocess.run([*cli, "run", "--backend", "hf", "--model", str(ckpt), "--benchmarks", "evr1_data", *common,
                        "--out", str(out), *extra, *sampling, "--max-tokens", str(w.eval_tokens), "--device", device,
                        "--dtype", dtype, "--no-progress"], check=True)  # fmt: skip
        seconds[name] = time.perf_counter() - t0
    return {"model": args.model, "samples": w.eval_samples, "cached_s": seconds["cached"],
            "decoded_s": seconds["decoded"], "ratio": seconds["decoded"] / seconds["cached"]}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage")
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--videos", type=Path, required=True)
    ap.add_argument("--workload", required=True, help="gpu_check.Workload as JSON")
    ap.add_argument("--model", default="qwen3_vl_2b")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    kind = args.stage.split("_")[0]
    run = {"setup": stage_setup, "cache": stage_cache, "train": stage_train, "eval": stage_eval}[kind]
    write_json(args.json, run(args))


if __name__ == "__main__":
    main()
