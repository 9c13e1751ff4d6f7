"""Qwen3-VL's published video evaluation settings (Instruct and Thinking models, all sizes).

- Frames and budget: "a sampling rate of 2 FPS, with a maximum of 2,048 frames and up to 224K video tokens ... the
  same for all models in the Qwen3-VL series" (maintainer, QwenLM/Qwen3-VL#1540). One Qwen3-VL video token covers
  32 x 32 pixels of a frame pair, so 224K tokens is `total_pixels = 224_000 * 32 * 32`; `size_factor` 32.
- Video-MME: the repository's own script, QwenLM/Qwen3-VL `evaluation/VideoMME/infer_instruct.sh` /
  `infer_think.sh`@9658872: fps 2, 4-512 frames, 3,584-401,408 pixels per frame, 19,267,584 in total.
- Decoding: Instruct temperature 0.7, top_p 0.8, top_k 20, repetition penalty 1.0, presence penalty 1.5, 32,768 new
  tokens (`infer_instruct.sh`); Thinking temperature 0.6, top_p 0.95, top_k 20, presence penalty 0.0, 32,768 tokens
  (#1540, `infer_think.sh`); a thinking answer is read after its last `</think>` (`run_videomme.py`).
- Prompts: the reported numbers were produced with VLMEvalKit, whose Qwen3-VL prompt is "Question: ...\\nOptions:\\n
  A. ...\\nAnswer with the option letter only." (prompt variant `qwen3_vl`; Video-MME uses the repository's own
  prompt, see the videomme benchmark).
"""

from __future__ import annotations

from evr1_eval.presets.registry import Preset, ResponseFilter, Source, register

_REPO = "QwenLM/Qwen3-VL@96588727e44c78b25ba03ea03b8e12f7e64fd0da"
SOURCES = (
    Source("fps 2, <= 2,048 frames, <= 224K video tokens, all sizes; thinking decoding", "QwenLM/Qwen3-VL#1540"),
    Source("Video-MME frames, pixels and instruct decoding", f"{_REPO} evaluation/VideoMME/infer_instruct.sh"),
    Source(
        "thinking decoding; answer after the last </think>",
        f"{_REPO} evaluation/VideoMME/infer_think.sh, run_videomme.py",
    ),
    Source("prompt: reported numbers come from VLMEvalKit", "open-compass/VLMEvalKit vlmeval/vlm/qwen3_vl/prompt.py"),
)
SAMPLING = {"fps": 2.0, "min_frames": 4, "max_frames": 2048, "total_pixels": 224_000 * 32 * 32, "size_factor": 32}
VIDEOMME = {"max_frames": 512, "min_pixels": 3584, "max_pixels": 401_408, "total_pixels": 19_267_584}


def _qwen3(
    name: str,
    description: str,
    generation: dict[str, float],
    response_filter: ResponseFilter = "none",
) -> Preset:
    """One Qwen3-VL preset: the reported frames and prompt, a model kind's decoding."""
    return register(
        Preset(
            name=name,
            family="qwen3_vl",
            description=description,
            sources=SOURCES,
            sampling=SAMPLING,
            benchmark_sampling={"videomme": VIDEOMME},
            generation={
                "max_tokens": 32768,
                "top_k": 20,
                "repetition_penalty": 1.0,
                **generation,
            },
            prompt_variant="qwen3_vl",
            response_filter=response_filter,
        )
    )


INSTRUCT = _qwen3(
    "qwen3_vl_official",
    "Qwen3-VL Instruct as reported: 2 fps, <= 2,048 frames, 224K video tokens; the repo's decoding",
    {"temperature": 0.7, "top_p": 0.8, "presence_penalty": 1.5},
)
THINKING = _qwen3(
    "qwen3_vl_thinking_official",
    "Qwen3-VL Thinking as reported: the Instruct frames, thinking decoding, answer after </think>",
    {"temperature": 0.6, "top_p": 0.95, "presence_penalty": 0.0},
    response_filter="after_think",
)
