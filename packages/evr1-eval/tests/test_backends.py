"""Backend pieces that need no engine: the OpenAI-compatible client against a mock server, vLLM argument mapping and
the video-metadata guard. The engines themselves are exercised in test_engines.py (nox -s eval_engines)."""

from __future__ import annotations

import asyncio
import base64
import io
import json

import numpy as np
import pytest

from evr1_eval.backends import BackendConfig, BackendError, GenerationParams, ImageInput, Request, VideoInput
from evr1_eval.backends.vllm import engine_args, video_item

httpx = pytest.importorskip("httpx", reason="the openai extra (httpx) is in evr1-eval's test group")

META = {"fps": 24.0, "frames_indices": [0, 12], "total_num_frames": 48}


def _video() -> VideoInput:
    frames = np.zeros((2, 16, 16, 3), np.uint8)
    frames[1] = 255
    return VideoInput(frames=frames, metadata=META)


def _openai(handler, **engine_kwargs):
    from evr1_eval.backends.openai import OpenAIBackend

    config = BackendConfig(model="served", base_url="http://judge.test/v1", engine_kwargs=engine_kwargs)
    return OpenAIBackend(config, transport=httpx.MockTransport(handler))


def _completion(text: str) -> dict:
    return {
        "choices": [{"message": {"content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3},
    }


def test_openai_sends_media_and_greedy_params_and_parses_usage() -> None:
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/chat/completions"
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=_completion("The answer is B"))

    backend = _openai(handler)
    req = Request(id="s1", prompt="Which?", videos=(_video(),), images=(ImageInput(np.zeros((4, 4, 3), np.uint8)),))

    async def go():
        await backend.start()
        try:
            return await backend.generate(req, GenerationParams(max_tokens=5))
        finally:
            await backend.close()

    gen = asyncio.run(go())
    assert gen.text == "The answer is B"
    assert gen.prompt_tokens == 11
    assert gen.completion_tokens == 3
    body = seen[0]
    assert body["model"] == "served"
    assert body["temperature"] == 0.0
    assert body["max_tokens"] == 5
    parts = body["messages"][-1]["content"]
    assert [p["type"] for p in parts] == ["video_url", "image_url", "text"]
    url = parts[0]["video_url"]["url"]
    assert url.startswith("data:video/jpeg;base64,")
    frames = url.split(",", 1)[1].split(",")
    assert len(frames) == 2  # one JPEG per sampled frame
    from PIL import Image

    second = np.asarray(Image.open(io.BytesIO(base64.b64decode(frames[1]))))
    assert second.mean() > 200  # the frames arrive in order and intact
    # vLLM reads every frame sent and times them from the source metadata (its defaults: first 32 frames, 1 fps)
    assert body["media_io_kwargs"] == {
        "video": {
            "num_frames": -1,
            "fps": 24.0,
            "frames_indices": [0, 12],
            "total_num_frames": 48,
            "do_sample_frames": False,
        }
    }


def test_openai_video_timing_is_per_request_and_checked() -> None:
    from evr1_eval.backends.openai import video_media_io_kwargs

    backend = _openai(lambda r: httpx.Response(200, json=_completion("x")))
    text_only = backend.payload(Request(id="t", prompt="Judge this."), GenerationParams())
    assert "media_io_kwargs" not in text_only  # judges and text prompts work on servers without the trust flag
    video = _video()
    timed = VideoInput(frames=video.frames, metadata={**META, "duration": 2.0})
    assert video_media_io_kwargs(Request(id="d", prompt="?", videos=(timed,)))["video"]["duration"] == 2.0
    assert video_media_io_kwargs(Request(id="two", prompt="?", videos=(video, video))) is not None  # same timing
    other = VideoInput(frames=video.frames, metadata={**META, "fps": 30.0})
    with pytest.raises(BackendError, match="one video timing per request"):
        video_media_io_kwargs(Request(id="mixed", prompt="?", videos=(video, other)))
    short = VideoInput(frames=video.frames, metadata={**META, "frames_indices": [0]})
    with pytest.raises(BackendError, match="1 frames_indices for 2 frames"):
        video_media_io_kwargs(Request(id="short", prompt="?", videos=(short,)))
    with pytest.raises(BackendError, match=r"lacks \['fps'\]"):
        video_media_io_kwargs(
            Request(
                id="bare",
                prompt="?",
                videos=(VideoInput(frames=video.frames, metadata={"frames_indices": [0, 1], "total_num_frames": 2}),),
            )
        )


def test_openai_names_the_server_flag_when_video_timing_is_refused() -> None:
    def untrusting(request: httpx.Request) -> httpx.Response:
        message = (
            "Per-request media_io_kwargs are disabled by default ... Start the server with --trust-request-mm-kwargs"
        )
        return httpx.Response(400, json={"error": {"message": message, "param": "media_io_kwargs"}})

    async def go():
        backend = _openai(untrusting)
        await backend.start()
        try:
            return await backend.generate(Request(id="v", prompt="?", videos=(_video(),)), GenerationParams())
        finally:
            await backend.close()

    with pytest.raises(BackendError, match=r"HTTP 400: .*start `vllm serve` with --trust-request-mm-kwargs\)$"):
        asyncio.run(go())


def test_openai_retries_transient_errors_then_fails_clearly() -> None:
    calls = {"n": 0}

    def flaky(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] < 2:
            return httpx.Response(503, text="busy")
        return httpx.Response(200, json=_completion("ok"))

    def broken(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, text="bad request: unknown model")

    def garbage(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"choices": []})

    async def one(handler):
        backend = _openai(handler, max_attempts=3)
        await backend.start()
        try:
            return await backend.generate(Request(id="x", prompt="hi"), GenerationParams(max_tokens=2))
        finally:
            await backend.close()

    import evr1_eval.backends.openai as mod

    async def no_sleep(_s: float) -> None:
        return None

    real_sleep, mod.asyncio.sleep = mod.asyncio.sleep, no_sleep  # type: ignore[assignment]
    try:
        assert asyncio.run(one(flaky)).text == "ok"
        assert calls["n"] == 2
        with pytest.raises(BackendError, match="HTTP 400: bad request"):
            asyncio.run(one(broken))
        with pytest.raises(BackendError, match="malformed chat completion for request x"):
            asyncio.run(one(garbage))
    finally:
        mod.asyncio.sleep = real_sleep  # type: ignore[assignment]


def test_openai_needs_url_and_model() -> None:
    from evr1_eval.backends.openai import OpenAIBackend

    with pytest.raises(BackendError, match="--base-url"):
        OpenAIBackend(BackendConfig(model="m"))


def test_vllm_engine_args_expose_scale_out_and_chunking_settings() -> None:
    config = BackendConfig(
        model="ckpt",
        tensor_parallel_size=2,
        data_parallel_size=4,
        max_num_batched_tokens=8192,
        enable_chunked_prefill=True,
        max_num_seqs=64,
        mm_processor_kwargs={"max_pixels": 1000},
        engine_kwargs={"seed": 3},
    )
    args = engine_args(config)
    assert args["tensor_parallel_size"] == 2
    assert args["data_parallel_size"] == 4
    assert args["max_num_batched_tokens"] == 8192
    assert args["enable_chunked_prefill"] is True
    assert args["max_num_seqs"] == 64
    assert args["mm_processor_kwargs"] == {"max_pixels": 1000}
    assert args["seed"] == 3
    assert "max_model_len" not in engine_args(BackendConfig(model="ckpt"))  # unset -> vLLM's own default
    with pytest.raises(BackendError, match="--model"):
        engine_args(BackendConfig())


def test_vllm_video_item_requires_metadata_and_disables_resampling() -> None:
    frames = np.zeros((2, 4, 4, 3), np.uint8)
    got_frames, meta = video_item(frames, dict(META))
    assert got_frames is frames
    assert meta["do_sample_frames"] is False
    assert meta["fps"] == 24.0
    with pytest.raises(BackendError, match=r"\['fps', 'frames_indices'\]"):
        video_item(frames, {"total_num_frames": 2})


def test_request_messages_put_media_before_text() -> None:
    req = Request(id="a", prompt="Q?", videos=(_video(),), system="sys")
    assert req.messages() == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "Q?"}]},
    ]


def test_forced_lengths_are_checked_recorded_only_when_set_and_sent_to_servers() -> None:
    """min_tokens / ignore_eos (load tests: forced answer lengths) never change the settings record of a normal run."""
    with pytest.raises(ValueError, match="min_tokens"):
        GenerationParams(max_tokens=4, min_tokens=5)
    with pytest.raises(ValueError, match="min_tokens"):
        GenerationParams(min_tokens=-1)
    assert set(GenerationParams().to_dict()) == {"max_tokens", "temperature", "top_p", "top_k", "seed", "stop"}
    forced = GenerationParams(max_tokens=9, min_tokens=9, ignore_eos=True)
    assert forced.to_dict()["min_tokens"] == 9
    assert forced.to_dict()["ignore_eos"] is True
    backend = _openai(lambda r: httpx.Response(200, json=_completion("x")))
    plain = backend.payload(Request(id="p", prompt="?"), GenerationParams())
    assert "min_tokens" not in plain  # servers without vLLM's extensions still accept normal requests
    assert "ignore_eos" not in plain
    body = backend.payload(Request(id="f", prompt="?"), forced)
    assert (body["max_tokens"], body["min_tokens"], body["ignore_eos"]) == (9, 9, True)
