"""What every backend sends and when it stops: media placed where the question puts them (the trainer's layout),
stop / suppressed token ids and penalties in each engine's own request format, the chat template's end-of-turn
token found from the template itself; and the one-line errors of the first hour (a mistyped model folder, no vLLM).

Light tests run in `nox -s eval`; the `hf` ones (a tiny Qwen checkpoint, transformers) in `nox -s eval_engines`.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evr1_eval.backends import BackendConfig, BackendError, GenerationParams, ImageInput, Request, VideoInput
from evr1_eval.backends.base import checked_model
from evr1_eval.backends.openai import OpenAIBackend, chat_messages
from evr1_eval.cli import main

META = {"fps": 2.0, "frames_indices": [0, 4], "total_num_frames": 8}


def _video() -> VideoInput:
    return VideoInput(frames=np.zeros((2, 28, 28, 3), np.uint8), metadata=META)


def _image() -> ImageInput:
    return ImageInput(pixels=np.zeros((28, 28, 3), np.uint8))


def test_media_go_where_the_question_puts_them() -> None:
    text = "Watch the video carefully.\nQuestion: <video>What colour?\nGive the option letter inside <answer></answer>."
    inline = Request(id="a", prompt=text, videos=(_video(),), inline_media=True)
    kinds = [(m["type"], m.get("text")) for m in inline.messages()[0]["content"]]
    assert kinds == [
        ("text", "Watch the video carefully.\nQuestion: "),
        ("video", None),
        ("text", "What colour?\nGive the option letter inside <answer></answer>."),
    ]
    # without markers (the official protocol, or media the question does not place): media first, then the text
    plain = Request(id="b", prompt="What colour?", videos=(_video(),), images=(_image(),))
    assert [m["type"] for m in plain.messages()[0]["content"]] == ["video", "image", "text"]
    # a marker is text unless the request says the prompt places its media
    literal = Request(id="c", prompt="Is <video> a tag?", videos=(_video(),))
    assert literal.messages()[0]["content"][-1] == {"type": "text", "text": "Is <video> a tag?"}
    # unplaced media go first (the trainer's prepended placeholders); a marker without media (--without-video) goes
    mixed = Request(id="d", prompt="A <image> then <video> and <video>.", images=(_image(),), videos=(_video(),),
                    inline_media=True)  # fmt: skip
    assert [k for k, _ in mixed.parts()] == ["text", "image", "text", "video", "text", "text"]
    unplaced = Request(id="f", prompt="Q: <video>?", images=(_image(),), videos=(_video(),), inline_media=True)
    assert [k for k, _ in unplaced.parts()] == ["image", "text", "video", "text"]
    assert [m["type"] for m in chat_messages(unplaced)[0]["content"]] == ["image_url", "text", "video_url", "text"]
    alone = Request(id="e", prompt="<video>How many?", inline_media=True)
    assert chat_messages(alone) == [{"role": "user", "content": "How many?"}]


def test_generation_params_record_new_fields_only_when_set() -> None:
    assert set(GenerationParams().to_dict()) == {"max_tokens", "temperature", "top_p", "top_k", "seed", "stop"}
    full = GenerationParams(stop_token_ids=[7, 8], suppress_token_ids=(3,), presence_penalty=1.5).to_dict()
    assert (full["stop_token_ids"], full["suppress_token_ids"], full["presence_penalty"]) == ([7, 8], [3], 1.5)
    assert "repetition_penalty" not in full
    with pytest.raises(ValueError, match="repetition_penalty"):
        GenerationParams(repetition_penalty=0)


def test_openai_requests_carry_stops_suppression_penalties_and_the_template() -> None:
    backend = OpenAIBackend(BackendConfig(model="m", base_url="http://x/v1", chat_template="{{ messages }}"))
    params = GenerationParams(stop_token_ids=(9,), suppress_token_ids=(5, 6), presence_penalty=1.5,
                              repetition_penalty=1.1)  # fmt: skip
    body = backend.payload(Request(id="a", prompt="hi"), params)
    assert body["stop_token_ids"] == [9]
    assert body["logit_bias"] == {"5": -100, "6": -100}
    assert (body["presence_penalty"], body["repetition_penalty"]) == (1.5, 1.1)
    assert body["chat_template"] == "{{ messages }}"
    plain = OpenAIBackend(BackendConfig(model="m", base_url="http://x/v1")).payload(Request(id="a", prompt="hi"),
                                                                                     GenerationParams())  # fmt: skip
    assert not {"stop_token_ids", "logit_bias", "presence_penalty", "repetition_penalty", "chat_template"} & set(plain)


def test_a_model_path_that_is_not_a_model_is_a_backend_error(tmp_path: Path) -> None:
    """The backends check `--model` with evr1-cache's checker (tested there) and report it as their own error."""
    with pytest.raises(BackendError, match=r"^hf backend: --model='\./missing/model': no such model folder"):
        checked_model("hf", "./missing/model")
    (tmp_path / "config.json").write_text("{}")
    assert checked_model("vllm", str(tmp_path)) == str(tmp_path)


@pytest.fixture
def annotations(tmp_path: Path) -> Path:
    rows = [{"problem_id": "1", "problem": "Q?", "options": ["A. a", "B. b"], "solution": "A",
             "problem_type": "multiple choice", "path": "v.mp4"}, {"problem_id": "2"}]  # fmt: skip
    (tmp_path / "mvbench.json").write_text(json.dumps(rows))
    return tmp_path


def _run(annotations: Path, *args: str) -> int:
    return main(["run", "--benchmarks", "mvbench", "--annotations-dir", str(annotations),
                 "--out", str(annotations / "out"), "--no-progress", *args])  # fmt: skip


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here (eval_engines)")
def test_a_missing_vllm_is_one_line_with_the_install_command(annotations: Path, capsys: Any) -> None:
    assert _run(annotations, "--model", "Qwen/Qwen3-VL-8B-Instruct") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # not the load errors, not a folder that was never written
    assert "needs vLLM, which is not installed: pip install 'evr1-eval[vllm]'" in err
    assert not (annotations / "out").exists()


@pytest.mark.hf
def test_a_missing_model_folder_is_one_line(annotations: Path, capsys: Any) -> None:
    pytest.importorskip("transformers", reason="needs the hf extra: nox -s eval_engines")
    assert _run(annotations, "--backend", "hf", "--model", "missing/path") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "--model='missing/path': no such model folder" in err  # offline (as in CI): checked before anything loads
    assert "Hub id" in err
    assert not (annotations / "out").exists()


@pytest.mark.hf
def test_a_folder_that_does_not_load_is_one_line(tmp_path: Path, capsys: Any) -> None:
    pytest.importorskip("transformers", reason="needs the hf extra: nox -s eval_engines")
    (tmp_path / "mvbench.json").write_text(
        json.dumps(
            [
                {
                    "problem_id": "1",
                    "problem": "Q?",
                    "options": ["A. a"],
                    "solution": "A",
                    "problem_type": "mcq",
                    "path": "v.mp4",
                }
            ]
        )
    )
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    assert _run(tmp_path, "--backend", "hf", "--model", str(broken)) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"--model={str(broken)!r}: the folder could not be loaded as a model" in err


# -- transformers --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers", reason="needs the hf extra: nox -s eval_engines")
    root = Path(__file__).resolve().parents[3]
    spec = importlib.util.spec_from_file_location("evr1_testenv_tiny_qwen", root / "testenv" / "tiny_qwen.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path: Path = module.build_tiny_qwen(tmp_path_factory.mktemp("tiny"), "qwen2_5_vl", head_dim=32)
    return path


@pytest.mark.hf
def test_the_end_of_turn_token_comes_from_the_chat_template(tiny: Path, tmp_path: Path) -> None:
    """A checkpoint whose generation config names only `<|endoftext|>` still stops at `<|im_end|>`, the token its
    chat template writes after an assistant turn."""
    import asyncio

    from transformers import AutoTokenizer

    from evr1_eval.backends import create_backend
    from evr1_eval.backends.base import end_of_turn_id, stop_token_ids_for

    tok = AutoTokenizer.from_pretrained(tiny)
    end, text = tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")
    assert end_of_turn_id(tok) == end
    assert end_of_turn_id(tok, chat_template="{{ messages[-1]['content'] }}") is None  # writes nothing after
    model = tmp_path / "eot"
    shutil.copytree(tiny, model)
    gen = json.loads((model / "generation_config.json").read_text())
    (model / "generation_config.json").write_text(json.dumps({**gen, "eos_token_id": text}))
    assert stop_token_ids_for(tok, text)[:1] == [text]
    backend = create_backend("hf", BackendConfig(model=str(model), device="cpu"))
    vocab = json.loads((model / "config.json").read_text())["text_config"]["vocab_size"]

    async def go() -> Any:
        await backend.start()
        try:
            only_end = tuple(i for i in range(vocab) if i != end)
            return await backend.generate(
                Request(id="x", prompt="hi"), GenerationParams(max_tokens=8, suppress_token_ids=only_end)
            )
        finally:
            await backend.close()

    out = asyncio.run(go())
    assert (out.completion_tokens, out.finish_reason) == (1, "stop")


@pytest.mark.hf
def test_presence_penalty_has_vllms_meaning() -> None:
    """Each token already in the answer (not the prompt) loses the penalty once, however often it occurred."""
    torch = pytest.importorskip("torch", reason="needs the hf extra: nox -s eval_engines")

    from evr1_eval.backends.hf import _PresencePenalty

    penalty = _PresencePenalty(1.5)
    scores = torch.zeros(1, 6)
    assert torch.equal(penalty(torch.tensor([[0, 1]]), scores), scores)  # the prompt alone: nothing
    after = penalty(torch.tensor([[0, 1, 3, 3, 4]]), torch.zeros(1, 6))
    assert after.tolist() == [[0.0, 0.0, 0.0, -1.5, -1.5, 0.0]]
