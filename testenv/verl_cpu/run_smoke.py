"""Test env only: real verl 0.9.1 GRPO steps on a CPU through `evr1-train engine=verl`, with a tiny Qwen2.5-VL,
generated videos cached by `evr1-cache build`, evr1's dataset class, evr1's rewards and the hybrid agent loop.

What it proves: evr1's verl pieces (plugin entry point, Evr1Dataset + cached frames, evr1_rewards through verl's
reward loop, the evr1_hybrid agent loop mixing stored trajectories into groups, the CLI's config path) work inside
verl's real Ray/FSDP/vLLM trainer. The CPU adaptations (platform plugin, fake Ray GPU, vLLM-CPU weights) live in this
folder only. Usage (in the venv of setup_venv.sh, from the repository root):

    python testenv/verl_cpu/run_smoke.py --workdir DIR [--steps 3] [--timeout 1500]

Prints a metrics table and writes DIR/smoke_summary.json; exits non-zero when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VIDEO = {"fps": 2.0, "nframes": None, "min_frames": 2, "max_frames": 4, "min_pixels": 3136, "max_pixels": 3136,
         "total_pixels": None, "size_factor": 28}  # fmt: skip
IMAGE = {"min_pixels": 3136, "max_pixels": 3136, "size_factor": 28}
COLOURS = ["red", "green", "blue", "white"]
OFFLINE_TEXT = "<think>I watched every frame.</think><answer>{letter}</answer>"

#: verl on a CPU (engine feasibility note §4): legacy trainer, fake GPU in Ray, FSDP2 + sdpa, vLLM-CPU settings.
CPU_OVERRIDES = [
    "+ray_kwargs.ray_init.num_gpus=1",
    "+ray_kwargs.ray_init.num_cpus=16",
    "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
    "actor_rollout_ref.model.use_remove_padding=False",
    "actor_rollout_ref.actor.strategy=fsdp2",
    "actor_rollout_ref.ref.strategy=fsdp2",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "actor_rollout_ref.rollout.enforce_eager=True",
    "actor_rollout_ref.rollout.free_cache_engine=False",
    "+actor_rollout_ref.rollout.enable_sleep_mode=False",
    "actor_rollout_ref.rollout.max_num_batched_tokens=2048",
    "actor_rollout_ref.rollout.max_model_len=1024",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.1",
    "reward.num_workers=1",
    "actor_rollout_ref.rollout.agent.num_workers=1",
    "data.dataloader_num_workers=0",
]
CPU_ENV = {
    "VERL_USE_EXTERNAL_MODULES": "cpu_platform",
    "VERL_PLATFORM": "cpu",
    "VERL_ENGINE_DEVICE": "cuda",
    "VERL_ENGINE_VENDOR": "nvidia",
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_NO_USAGE_STATS": "1",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "RAY_USAGE_STATS_ENABLED": "0",
}


def make_data(work: Path, rows: int) -> tuple[Path, Path]:
    """Videos of a coloured square, MC questions, stored trajectories on every other row; cache built by evr1-cache."""
    from evr1_cache import ImageSpec, SamplingSpec, build_cache
    from evr1_cache.testing import make_synthetic_video

    data = work / "data"
    records = []
    for i in range(rows):
        clip = make_synthetic_video(data / "clips" / f"c{i}.mp4", n_frames=12 + 4 * i, fps=8.0, size=(64 + 8 * i, 64))
        letter = "ABCD"[i % 4]
        row = {
            "problem_id": f"r{i}",
            "problem": "<video>Which option names the colour written in the frame counter?",
            "answer": letter,
            "problem_type": "multiple choice",
            "options": [f"{k}. {c}" for k, c in zip("ABCD", COLOURS, strict=True)],
            "videos": [str(clip.relative_to(data))],
            "data_source": "evr1_smoke",
        }
        if i % 2 == 0:
            row |= {"offline_output": OFFLINE_TEXT.format(letter=letter), "has_offline_trajectory": True}
        records.append(row)
    raw = data / "train.jsonl"
    raw.write_text("".join(json.dumps(r) + "\n" for r in records))
    cache = work / "cache"
    report = build_cache(raw, cache, SamplingSpec(**VIDEO), ImageSpec(**IMAGE), progress=False)
    if not report.ok:
        raise SystemExit(f"cache build failed: {report.errors}")
    return Path(report.output_data), cache


def make_model(work: Path) -> Path:
    sys.path.insert(0, str(ROOT / "testenv"))
    from tiny_qwen import build_tiny_qwen

    return build_tiny_qwen(work / "models", "qwen2_5_vl", head_dim=32)


#: verl's V1 trainer (TransferQueue) on a small machine: one storage unit instead of 8 one-CPU actors.
TRAINERS = {
    "v0": ["trainer.use_v1=False"],
    "v1": ["trainer.use_v1=True", "transfer_queue.backend.SimpleStorage.num_data_storage_units=1"],
}


def overrides(
    work: Path, data: Path, cache: Path, model: Path, steps: int, trainer: str, handling: str, ray_tmp: str
) -> list[str]:
    return [
        "engine=verl",
        "algorithm.adv_estimator=grpo",
        f"data.train_files={data}",
        f"data.val_files={data}",
        "data.train_batch_size=4",
        "data.max_prompt_length=512",
        "data.max_response_length=32",
        f"data.evr1.cache_dir={cache}",
        "data.evr1.video_source=cache_only",
        *[f"data.evr1.video.{k}={'null' if v is None else v}" for k, v in VIDEO.items()],
        *[f"data.evr1.image.{k}={v}" for k, v in IMAGE.items()],
        f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.actor.optim.lr=1e-5",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.actor.use_kl_loss=False",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4",
        "algorithm.use_kl_in_reward=False",
        "evr1.hybrid.enable=true",
        "evr1.hybrid.k=1",
        f"evr1.hybrid.offline_handling={handling}",
        "trainer.device=cpu",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        f"trainer.total_training_steps={steps}",
        "trainer.logger=[console,file]",
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        "trainer.project_name=evr1_smoke",
        "trainer.experiment_name=cpu_grpo_hybrid",
        f"trainer.rollout_data_dir={work / 'rollouts'}",
        f"trainer.default_local_dir={work / 'ckpt'}",
        "evr1.rollout_dump.enable=true",  # evr1's own dumps (V1 trainer): checked by check_evr1_dumps
        "evr1.rollout_dump.every_n_steps=1",
        f"+ray_kwargs.ray_init._temp_dir={ray_tmp}",
        f"hydra.run.dir={work / 'hydra'}",
        *CPU_OVERRIDES,
        *TRAINERS[trainer],
    ]


def check_evr1_dumps(work: Path, steps: int, groups: int, n: int) -> dict:
    """evr1's rollout dumps of the V1 run: one file per step, every group with its n responses, offline and online
    ones, frames from the cache; then the viewer is built from them (evr1-train view)."""
    from evr1_train.rollouts.view import build_viewer, find_rollouts, read_dump

    folder = find_rollouts(work / "ckpt")
    _, records, problems = read_dump(folder)
    assert not problems, problems
    assert sorted({r["step"] for r in records}) == list(range(1, steps + 1)), sorted({r["step"] for r in records})
    assert all(len(r["responses"]) == n for r in records), [len(r["responses"]) for r in records]
    assert len(records) == steps * groups, len(records)
    offline = [x["offline"] for r in records for x in r["responses"]]
    assert any(offline), offline
    assert not all(offline), offline
    media = [m for r in records for m in r["media"]]
    assert media
    assert all(m["frames_from"] == "cache" and m["frame_indices"] for m in media if m["kind"] == "video")
    assert all(isinstance(x["advantage"], float) for r in records for x in r["responses"])
    index = build_viewer([work / "ckpt"], work / "viewer")
    return {"dumped_steps": steps, "groups": len(records), "viewer": str(index)}


def _origin(rec: dict) -> str:
    return "offline" if rec.get("output", "").strip().startswith("<think>I watched every frame.</think>") else "online"


def summarise(work: Path, wall_s: float) -> dict:
    """Per-step verl metrics (file logger) + offline/online counts and scores from verl's rollout dump."""
    dumps: dict[int, list[dict]] = {}
    for path in (work / "rollouts").glob("*.jsonl"):
        dumps[int(path.stem)] = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    steps = []
    for line in (work / "metrics.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        m = json.loads(line)
        data, step = m.get("data", m), m.get("step")
        recs = dumps.get(int(step), []) if step is not None else []
        steps.append({
            "step": step,
            "score_mean": data.get("critic/score/mean"),
            "offline": sum(_origin(r) == "offline" for r in recs),
            "online": sum(_origin(r) == "online" for r in recs),
            "step_s": data.get("timing_s/step"),
            "gen_s": data.get("timing_s/gen"),
            "old_log_prob_s": data.get("timing_s/old_log_prob"),
            "update_actor_s": data.get("timing_s/update_actor"),
            "grad_norm": data.get("actor/grad_norm"),
            "evr1_offline_token_frac": data.get("actor/evr1_offline_token_frac"),
            "evr1_hybrid_offline_samples": data.get("evr1/hybrid/offline_samples"),
        })  # fmt: skip
    by_origin: dict[str, list[dict]] = {"offline": [], "online": []}
    for recs in dumps.values():
        for rec in recs:
            by_origin[_origin(rec)].append(rec)

    def mean(origin: str, key: str) -> float | None:
        vals = [float(r[key]) for r in by_origin[origin] if r.get(key) is not None]
        return round(sum(vals) / len(vals), 4) if vals else None

    return {
        "steps": steps,
        "samples": {k: len(v) for k, v in by_origin.items()},
        "score_mean": {k: mean(k, "score") for k in by_origin},
        "accuracy_mean": {k: mean(k, "accuracy") for k in by_origin},
        "format_mean": {k: mean(k, "format") for k in by_origin},
        "wall_s": round(wall_s, 1),
    }


#: What Ray appends under its temp folder for its longest unix socket, e.g.
#: "/session_2026-11-30_13-10-44_377741_28054/sockets/plasma_store", plus headroom for longer pids.
RAY_SOCKET_SUFFIX = 72
AF_UNIX_MAX = 107


def short_ray_tmp(preferred: str | None) -> str:
    """A fresh Ray temp folder whose socket paths fit AF_UNIX's 107 bytes, outside any virtualenv.

    A clone in a deep folder makes `<repo>/.nox/...` too long for Ray's sockets, so fall back to the system temp
    folders (the shortest that is writable wins)."""
    candidates = [c for c in (preferred, "/tmp", os.environ.get("TMPDIR"), tempfile.gettempdir()) if c]
    for parent in candidates:
        # mkdtemp adds the prefix and 8 random characters
        if len(str(Path(parent).resolve())) + len("/evr1r-xxxxxxxx") + RAY_SOCKET_SUFFIX > AF_UNIX_MAX:
            continue
        try:
            Path(parent).mkdir(parents=True, exist_ok=True)
            return tempfile.mkdtemp(prefix="evr1r-", dir=parent)
        except OSError:
            continue
    raise SystemExit(f"no writable temp folder short enough for Ray's unix sockets among {candidates}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--timeout", type=int, default=1500)
    ap.add_argument("--trainer", choices=sorted(TRAINERS), default="v0", help="verl's legacy (v0) or V1 trainer")
    ap.add_argument("--offline-handling", choices=["on_policy", "off_policy"], default="on_policy")
    ap.add_argument("--ray-tmp-root", default=None, help="parent of Ray's temp folder (short, outside any venv)")
    args = ap.parse_args()
    work = Path(args.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    data, cache = make_data(work, args.rows)
    model = make_model(work)
    env = {**os.environ, **CPU_ENV, "VERL_FILE_LOGGER_PATH": str(work / "metrics.jsonl")}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).strip(os.pathsep)
    ray_tmp = short_ray_tmp(args.ray_tmp_root)
    cmd = [
        sys.executable,
        "-m",
        "evr1_train.cli",
        *overrides(work, data, cache, model, args.steps, args.trainer, args.offline_handling, ray_tmp),
    ]
    print("+", " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    try:
        with open(work / "train.log", "w") as log:
            proc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout, check=False)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (work / "train.log").read_text().splitlines()[-60:]
        raise SystemExit(f"evr1-train failed (rc={proc.returncode}); last log lines:\n" + "\n".join(tail))
    summary = summarise(work, wall)
    (work / "smoke_summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    assert len(summary["steps"]) == args.steps, f"expected {args.steps} logged steps, got {len(summary['steps'])}"
    assert summary["samples"]["offline"] > 0, summary["samples"]
    assert summary["samples"]["online"] > 0, summary["samples"]
    assert all(s["score_mean"] is not None for s in summary["steps"]), "no reward logged"
    if args.trainer == "v1":  # the `evr1` trainer mode: offline/online metrics, and the off-policy loss in the worker
        assert all(s["evr1_hybrid_offline_samples"] is not None for s in summary["steps"]), "no evr1/hybrid metrics"
        print(json.dumps(check_evr1_dumps(work, args.steps, groups=4, n=4)))
        if args.offline_handling == "off_policy":
            assert any((s["evr1_offline_token_frac"] or 0) > 0 for s in summary["steps"]), "loss saw no offline token"
    print("verl CPU smoke run: OK")


if __name__ == "__main__":
    main()
