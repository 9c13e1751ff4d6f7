"""Demo runs for the viewer's tests, its benchmark and a first look: generated clips, a real frame cache, records.

`python -m evr1_cache.viewer.testing OUT/` writes a demo site (two evaluation runs side by side + a training run).
The records are synthetic but the frames are real cache entries built by `build_cache` from generated videos, so
every thumbnail and timestamp on the page comes through the same path as in a real run.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

from evr1_cache.spec import ImageSpec, SamplingSpec
from evr1_cache.viewer.records import Curve, MediaRef, ResponseRecord, RunRecord, SampleRecord

#: Small frames and few of them: a demo cache builds in seconds.
DEMO_SPEC = SamplingSpec(fps=2.0, min_frames=4, max_frames=8, min_pixels=56 * 56, max_pixels=112 * 112)
BENCHMARKS = {"videomme": ("perception", "reasoning"), "mvbench": ("action", "counting", "object")}
PROBLEM_TYPES = ("multiple choice", "numerical", "open-ended")
#: An adversarial response: the page must show it as text (no script runs, no image loads).
HOSTILE = '<script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2">I pick <answer>B</answer>'


def demo_cache(
    work_dir: str | os.PathLike[str], n_videos: int = 6, *, spec: SamplingSpec = DEMO_SPEC, seconds: float = 2.0
) -> tuple[Path, list[Path]]:
    """Generate `n_videos` clips (`seconds` to 2x that, 8 fps) under work_dir/media, cache them under work_dir/cache."""
    from evr1_cache.build import build_cache
    from evr1_cache.testing import make_synthetic_video

    work = Path(work_dir)
    media = work / "media"
    media.mkdir(parents=True, exist_ok=True)
    videos = []
    for i in range(n_videos):
        path = media / f"clip{i:02d}.mp4"
        if not path.exists():
            make_synthetic_video(path, int(8 * seconds) + i, 8.0, (96, 64))  # distinct lengths: distinct entries
        videos.append(path)
    data = work / "media.jsonl"
    data.write_text("".join(json.dumps({"video": str(v)}) + "\n" for v in videos), encoding="utf-8")
    build_cache(data, work / "cache", spec, ImageSpec(), progress=False)
    return work / "cache", videos


def media_ref(cache_dir: Path, video: Path, spec: SamplingSpec = DEMO_SPEC) -> MediaRef:
    """The reference a converter records: entry path + the frame indices and timestamps of the entry."""
    from evr1_cache.reader import CacheReader

    reader = CacheReader(cache_dir)
    _, meta = reader.load(video, spec)
    rel = reader.path_for(video, spec).relative_to(cache_dir)
    return MediaRef(
        kind="video",
        source=str(video),
        cache_root=str(cache_dir),
        cache_file=str(rel),
        frame_indices=tuple(meta.frames_indices),
        timestamps=tuple(meta.timestamps),
    )


def demo_eval_runs(
    cache_dir: Path, videos: list[Path], n: int = 60, seed: int = 0, *, spec: SamplingSpec = DEMO_SPEC
) -> tuple[RunRecord, RunRecord]:
    """A base and an "RL" evaluation run over the same `n` samples (some verdicts flip, a few rows are errors)."""
    rng = random.Random(seed)
    refs = [media_ref(cache_dir, v, spec) for v in videos]
    runs = []
    for name, skill in (("base", 0.45), ("rl-step200", 0.7)):
        samples = []
        for i in range(n):
            r = random.Random(seed * 7919 + i)
            bench = list(BENCHMARKS)[i % len(BENCHMARKS)]
            task = BENCHMARKS[bench][i % len(BENCHMARKS[bench])]
            ptype = PROBLEM_TYPES[i % len(PROBLEM_TYPES)]
            gt = "ABCD"[r.randrange(4)] if ptype == "multiple choice" else str(r.randrange(10))
            correct = rng.random() < skill
            answer = gt if correct else ("ABCD".replace(gt, "")[r.randrange(3)] if gt.isalpha() else str(int(gt) + 1))
            error = "media: MediaError: clip07.mp4: moov atom not found (file truncated?)" if i % 29 == 7 else None
            text = (
                None
                if error
                else f"<think>The clip shows {task}; frame 3 is decisive.</think> <answer>{answer}</answer>"
            )
            if name == "rl-step200" and i == 5:
                text, answer, correct = HOSTILE, "B", gt == "B"
            prompt = f"Question {i}: what happens in the video? Answer with the option letter.\n(A) one (B) two (C) three (D) four"
            if i % 17 == 3:
                prompt += "\nSubtitles: " + " ".join(f"line {k} of the narration." for k in range(120))
            resp = ResponseRecord(
                text=text,
                extracted=None if error else answer,
                scores={} if error else {"score": float(correct), "format": 1.0},
                correct=None if error else correct,
                error=error,
                tokens=None if error else 40 + r.randrange(60),
            )
            samples.append(
                SampleRecord(
                    key=f"{bench}/{i}",
                    label=f"{bench}-{i:04d}",
                    benchmark=bench,
                    task=task,
                    problem_type=ptype,
                    prompt=prompt,
                    ground_truth=gt,
                    # the clip of a media error was never loaded: its strip says so instead of showing frames
                    media=(MediaRef(kind="video", source="clip07.mp4", note="could not be loaded"),)
                    if error
                    else (refs[i % len(refs)],),
                    responses=(resp,),
                )
            )
        acc = sum(s.verdict == "correct" for s in samples) / len(samples)
        runs.append(RunRecord(name=name, kind="eval", samples=samples, summary={"accuracy": round(acc, 4)},
                              source=f"runs/{name}"))  # fmt: skip
    return runs[0], runs[1]


def demo_train_run(
    cache_dir: Path, videos: list[Path], steps: tuple[int, ...] = (10, 20, 30, 40), groups: int = 6, n: int = 4
) -> RunRecord:
    """Rollout groups at a few dumped steps: rewards rise with the step, one slot per group is a stored response."""
    refs = [media_ref(cache_dir, v) for v in videos]
    tasks = ("color", "direction", "count")
    samples = []
    for step in steps:
        for g in range(groups):
            r = random.Random(step * 1000 + g)
            task = tasks[g % len(tasks)]
            gt = "ABCD"[g % 4]
            responses = []
            rewards = []
            for k in range(n):
                offline = k == n - 1
                correct = offline or r.random() < step / (steps[-1] + 10)
                ans = gt if correct else "ABCD"[(g + 1) % 4]
                reward = 0.9 * correct + 0.1
                rewards.append(reward)
                responses.append((ans, correct, offline, reward))
            mean = sum(rewards) / n
            std = (sum((x - mean) ** 2 for x in rewards) / n) ** 0.5 or 1.0
            samples.append(
                SampleRecord(
                    key=f"row-{g}",
                    label=f"step {step} · row-{g}",
                    task=task,
                    problem_type="multiple choice",
                    prompt=f"<video>\nWhat {task} is the square? (A) red (B) green (C) blue (D) yellow",
                    ground_truth=gt,
                    media=(refs[g % len(refs)],),
                    step=step,
                    responses=tuple(
                        ResponseRecord(
                            text=f"<answer>{a}</answer>",
                            extracted=a,
                            scores={"overall": rw, "accuracy": float(c), "format": 1.0},
                            correct=c,
                            source="offline" if off else "online",
                            advantage=round((rw - mean) / std, 4),
                            tokens=5,
                        )
                        for a, c, off, rw in responses
                    ),
                )
            )
    curves = []
    for metric in ("reward", "accuracy"):
        for task in ("all", *tasks):
            pts = []
            for step in steps:
                rs = [
                    (resp.scores["overall"] if metric == "reward" else float(bool(resp.correct)))
                    for s in samples
                    if s.step == step and task in ("all", s.task)
                    for resp in s.responses
                    if resp.source == "online"
                ]
                pts.append((float(step), sum(rs) / len(rs)))
            curves.append(Curve(metric=metric, series=task, points=tuple(pts)))
    return RunRecord(name="quickstart", kind="train", samples=samples, curves=curves, source="runs/quickstart")


def main(argv: list[str] | None = None) -> int:
    from evr1_cache.viewer.site import write_site

    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0] if args else "evr1-viewer-demo")
    cache, videos = demo_cache(out / "_work")
    base, rl = demo_eval_runs(cache, videos)
    result = write_site([base, rl, demo_train_run(cache, videos)], out / "site", title="evr1 viewer demo")
    print(result.index)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
