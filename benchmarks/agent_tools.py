"""Agent tool latency: `get_frames` / `zoom` served from a warm cache (evr1_cache.tools) vs decoding the window per
call (what tool-calling systems do: seek, decode the window, sample, resize), p50 / p99 and the ratio, measured in the
same run on the same generated video; and, with `--step`, one multi-turn step (two tool calls) vs a single-turn step
of the local engine on a tiny random Qwen2.5-VL (rollout by a scripted policy + log-prob forward + backward).

    uv run python benchmarks/agent_tools.py --calls 200 --step

"warm cache": the tool's stream was built once (the first call of the first episode); each timed call opens a new
episode (`ToolSession`), so it pays the cache read, not an in-episode memo; "in-episode" reuses one session.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def percentiles(times: list[float]) -> tuple[float, float]:
    """(p50, p99) in milliseconds."""
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1e3, p99 * 1e3


def timed(fn: Callable[[int], Any], n: int) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t0)
    return out


def decode_window(path: Path, start: float, end: float, n: int, height: int, width: int) -> Any:
    """The per-call baseline: seek to `start`, decode to `end`, keep `n` evenly spaced frames, resize them."""
    import av
    import numpy as np

    from evr1_cache import resample

    frames = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        container.seek(int(start / stream.time_base), stream=stream, backward=True)
        for frame in container.decode(stream):
            t = float(frame.pts * stream.time_base)
            if t < start:
                continue
            if t > end:
                break
            frames.append(frame.to_ndarray(format="rgb24"))
    picked = np.stack([frames[round(i)] for i in np.linspace(0, len(frames) - 1, n)])
    return resample(picked, height, width, "torchvision-bicubic-aa")


def tool_latency(args: argparse.Namespace, work: Path) -> None:
    from evr1_cache import MediaLoader
    from evr1_cache.testing import make_synthetic_video
    from evr1_cache.tools import HERMES, ToolBudget, ToolCall, ToolConfig, ToolSession

    video = make_synthetic_video(work / "long.mp4", int(args.seconds * 25), 25.0, (640, 360), gop=50)
    loader = MediaLoader(work / "cache", write_cache=True)
    config = ToolConfig(fps=4.0)
    budget = ToolBudget(frames_per_call=8, calls_per_episode=10**6, pixels_per_episode=10**12)
    rng = random.Random(0)
    windows = [(s, s + 4.0) for s in (rng.uniform(0, args.seconds - 4.0) for _ in range(args.calls))]

    def call(session: ToolSession, name: str, arguments: dict[str, Any]) -> Any:
        (result,) = session.answer(HERMES.render_call(ToolCall(name, arguments))).results
        assert result.ok, result.text
        return result

    t0 = time.perf_counter()
    first = ToolSession(video, loader, config=config, budget=budget)
    clip = call(first, "get_frames", {"start": 0.0, "end": 4.0, "n": 8}).media[0]
    call(first, "zoom", {"time": 1.0, "box": [0.25, 0.25, 0.75, 0.75]})
    build = time.perf_counter() - t0
    h, w = clip.frames.shape[1:3]

    def warm(i: int) -> None:
        start, end = windows[i]
        call(
            ToolSession(video, loader, config=config, budget=budget), "get_frames", {"start": start, "end": end, "n": 8}
        )

    episode = ToolSession(video, loader, config=config, budget=budget)

    def in_episode(i: int) -> None:
        start, end = windows[i]
        call(episode, "get_frames", {"start": start, "end": end, "n": 8})

    def zoom(i: int) -> None:
        t = windows[i][0]
        call(ToolSession(video, loader, config=config, budget=budget), "zoom", {"time": t, "box": [0.2, 0.2, 0.6, 0.6]})

    def decoded(i: int) -> None:
        start, end = windows[i]
        decode_window(video, start, end, 8, h, w)

    rows = {
        "get_frames, warm cache (new episode per call)": timed(warm, args.calls),
        "get_frames, in-episode (stream held)": timed(in_episode, args.calls),
        "zoom, warm cache (new episode per call)": timed(zoom, args.calls),
        "baseline: decode the 4 s window per call": timed(decoded, max(10, args.calls // 10)),
    }
    base = percentiles(rows["baseline: decode the 4 s window per call"])[0]
    print(f"video: {args.seconds:.0f} s, 640x360 at 25 fps; tool stream {config.fps} fps, {w}x{h}; 8 frames per call")
    print(f"first use (builds the two cached streams): {build:.2f} s")
    print(f"{'path':52s} {'p50 ms':>9s} {'p99 ms':>9s} {'x vs decode':>12s}")
    for name, times in rows.items():
        p50, p99 = percentiles(times)
        print(f"{name:52s} {p50:9.2f} {p99:9.2f} {base / p50:12.1f}")


def step_time(args: argparse.Namespace, work: Path) -> None:
    import torch

    from evr1_cache import MediaLoader, SamplingSpec
    from evr1_cache.families import get_family
    from evr1_cache.testing import make_synthetic_video
    from evr1_cache.tools import HERMES, ToolBudget, ToolCall, ToolConfig, ToolSession
    from evr1_train.engine.agent import AgentSettings, ScriptedPolicy, episode_logprobs, run_episode
    from evr1_train.engine.batch import encode_prompt
    from evr1_train.engine.policy import load_policy, pick_runtime
    from evr1_train.quickstart.model import TinyVLMSpec, save_tiny_vlm

    torch.set_num_threads(1)
    model_dir = save_tiny_vlm(work / "tiny", TinyVLMSpec(arch="qwen2_5_vl"))
    runtime = pick_runtime("cpu")
    model, processor = load_policy(str(model_dir), runtime)
    family = get_family("qwen2_5_vl")
    video = make_synthetic_video(work / "v.mp4", 80, 10.0, (112, 84))
    loader = MediaLoader(work / "cache", write_cache=True)
    tools = ToolConfig(fps=2.0, frame_max_pixels=3136, min_pixels=3136, zoom_fps=1.0, zoom_source_pixels=12544,
                       zoom_min_pixels=3136, zoom_max_pixels=3136)  # fmt: skip
    got = loader.frames(video, SamplingSpec(nframes=4, fps=None, min_pixels=3136, max_pixels=3136))
    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "What colour?"}]}]
    prompt = encode_prompt(processor, messages, [], [(got.frames.copy(), got.meta)], family)
    eos = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    multi = [
        "Look. " + HERMES.render_call(ToolCall("get_frames", {"start": 1.0, "end": 5.0, "n": 4})),
        HERMES.render_call(ToolCall("zoom", {"time": 2.0, "box": [0.0, 0.0, 0.5, 0.5]})),
        "<answer>B</answer>",
    ]

    def step(script: list[str]) -> float:
        t0 = time.perf_counter()
        session = ToolSession(video, loader, config=tools, budget=ToolBudget(frames_per_call=4))
        policy = ScriptedPolicy(processor.tokenizer, script, eos)
        episodes = [run_episode(policy, processor, prompt, session, AgentSettings(), family)]
        logp, mask = episode_logprobs(model, episodes, pad_id=0, temperature=1.0, runtime=runtime)
        (-(logp * mask).sum() / mask.sum()).backward()
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - t0

    step(multi)  # warm-up (builds the tool streams)
    single = [step(["<answer>B</answer>"]) for _ in range(args.steps)]
    multi_t = [step(multi) for _ in range(args.steps)]
    s, m = statistics.median(single), statistics.median(multi_t)
    print(f"tiny Qwen2.5-VL, CPU, 1 thread, {args.steps} steps each (scripted rollout + log-prob forward + backward)")
    print(f"single-turn step: {s * 1e3:.0f} ms; two-tool-call step: {m * 1e3:.0f} ms; ratio {m / s:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="timed calls per path")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the generated video")
    parser.add_argument("--step", action="store_true", help="also time a multi-turn vs a single-turn engine step")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        tool_latency(args, Path(tmp))
        if args.step:
            step_time(args, Path(tmp))


if __name__ == "__main__":
    main()
