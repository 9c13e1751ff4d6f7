"""`evr1-eval run --tools`: the runner answers with the shared tool layer over real cached frames, the next request
carries the whole conversation (history + the tools' clip and crop), every turn is recorded and the final answer
is scored."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from evr1_cache import MediaLoader, SamplingSpec
from evr1_cache.testing import make_synthetic_video
from evr1_cache.tools import HERMES, ToolBudget, ToolCall, ToolConfig
from evr1_eval.agent import AgentEval, parse_tools, run_agent
from evr1_eval.api.base import make_error_row
from evr1_eval.backends import GenerationParams
from evr1_eval.backends.base import Request
from evr1_eval.runner import Job, RunConfig, SampleMedia, evaluate
from evr1_eval.types import OFFICIAL_READING, BenchmarkSummary, Generation, Judge, Reading, Sample, ScoredSample

TOOLS = ToolConfig(fps=4.0, frame_max_pixels=3136, min_pixels=784, zoom_fps=2.0, zoom_source_pixels=12544,
                   zoom_min_pixels=3136, zoom_max_pixels=3136)  # fmt: skip
SCRIPT = [
    "Looking. " + HERMES.render_call(ToolCall("get_frames", {"start": 0.5, "end": 2.5, "n": 4})),
    HERMES.render_call(ToolCall("zoom", {"time": 1.0, "box": [0.0, 0.0, 0.5, 0.5]})),
    "B",
]


class TinyBench:
    """Exact letter match, micro accuracy (a benchmark reduced to what the runner asks)."""

    name = "tiny"
    prompt_version = "t1"
    sampling = SamplingSpec(nframes=4, fps=None, min_pixels=3136, max_pixels=3136)
    reference = None
    judge_optional_types: frozenset[str] = frozenset()

    async def score_with_judge(
        self, sample: Sample, response: str, judge: Judge | None, *, reading: Reading = OFFICIAL_READING
    ) -> ScoredSample:
        return self.score(sample, response, reading=reading)

    def error_row(self, sample: Sample, error: str) -> ScoredSample:
        return make_error_row(self.name, sample, error)

    def score(self, sample: Sample, response: str | None, *, reading: Reading = OFFICIAL_READING) -> ScoredSample:
        got = (response or "").strip()[:1] or None
        return ScoredSample(id=sample.id, benchmark=self.name, problem_type=sample.problem_type, response=response,
                            extracted=got, score=float(got == sample.ground_truth))  # fmt: skip

    def aggregate(self, rows: list[ScoredSample]) -> BenchmarkSummary:
        acc = 100.0 * sum(r.score for r in rows) / max(1, len(rows))
        return BenchmarkSummary(benchmark=self.name, primary="accuracy", metrics={"accuracy": acc},
                                counts={"total": len(rows)})  # fmt: skip


class ScriptedBackend:
    """Answers with the k-th scripted turn for a request with k earlier turns; keeps every request it got."""

    def __init__(self, script: list[str]) -> None:
        self.script = script
        self.requests: list[Request] = []

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def settings(self) -> dict[str, Any]:
        return {"backend": "scripted"}

    async def generate(self, request: Request, params: GenerationParams) -> Generation:
        self.requests.append(request)
        text = self.script[min(len(request.history), len(self.script) - 1)]
        return Generation(text=text, prompt_tokens=10, completion_tokens=len(text), finish_reason="stop")


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_synthetic_video(tmp_path_factory.mktemp("agent_eval") / "v.mp4", 30, 10.0, (112, 84))


def _agent(cache: Path, **kw: Any) -> AgentEval:
    loader = MediaLoader(cache, write_cache=True)
    return AgentEval(
        tools=("get_frames", "zoom"), loader=loader, config=TOOLS, budget=ToolBudget(frames_per_call=4), **kw
    )


def test_run_with_tools_records_every_turn_and_scores_the_final_answer(tmp_path: Path, clip: Path) -> None:
    sample = Sample(id="q0", benchmark="tiny", prompt="Which? Answer with a letter.", ground_truth="B",
                    problem_type="multiple_choice", videos=(str(clip),))  # fmt: skip
    backend = ScriptedBackend(SCRIPT)
    media = SampleMedia(MediaLoader(tmp_path / "cache", write_cache=True))
    config = RunConfig(out_dir=tmp_path / "run", progress=False, agent=_agent(tmp_path / "cache"))
    evaluate(backend, [Job(TinyBench(), [sample])], config, media=media)  # type: ignore[arg-type]
    (row,) = [json.loads(line) for line in (tmp_path / "run" / "tiny" / "results.jsonl").read_text().splitlines()]
    assert row["score"] == 1.0
    assert row["response"] == "B"
    agent = row["details"]["agent"]
    assert [[c["name"] for c in t["calls"]] for t in agent["turns"]] == [["get_frames"], ["zoom"], []]
    assert len(agent["turns"][0]["calls"][0]["media"][0]["timestamps"]) == 4
    assert agent["turns"][0]["said"] == SCRIPT[0]
    assert agent["stats"]["served"] == 2
    assert agent["finished"] is True
    # each request is the whole conversation: the tools' clip, then the crop, join the media in order
    assert [len(r.videos) for r in backend.requests] == [1, 2, 2]
    assert [len(r.images) for r in backend.requests] == [0, 0, 1]
    roles = [m["role"] for m in backend.requests[2].messages()]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    tool_turn = backend.requests[2].messages()[3]["content"]
    assert [c["type"] for c in tool_turn] == ["text", "video", "text"]
    assert tool_turn[0]["text"].startswith("<tool_response>")
    assert "get_frames" in str(backend.requests[0].system)
    first_turn = backend.requests[2].messages()[1]["content"]
    assert [c["type"] for c in first_turn].count("video") == 1  # the overview stays the first turn's only video
    settings = json.loads((tmp_path / "run" / "tiny" / "run.json").read_text())
    assert "get_frames" in json.dumps(settings)  # tools are part of the recorded settings


def test_out_of_turns_scores_an_empty_answer(tmp_path: Path, clip: Path) -> None:
    import asyncio

    backend = ScriptedBackend([SCRIPT[0]])  # never stops calling
    request = Request(id="q", prompt="?", videos=())
    out = asyncio.run(run_agent(backend, request, GenerationParams(), _agent(tmp_path, max_turns=3), str(clip)))
    assert out.final == ""
    assert len(backend.requests) == 3
    assert out.record["finished"] is False
    assert out.record["stats"]["calls"] == 3


def test_parse_tools() -> None:
    assert parse_tools("get_frames, zoom") == ("get_frames", "zoom")
    with pytest.raises(KeyError, match="did you mean 'zoom'"):
        parse_tools("zom")
    with pytest.raises(ValueError, match="at least one"):
        parse_tools(" , ")


def test_viewer_shows_each_turn(tmp_path: Path, clip: Path) -> None:
    import asyncio

    from evr1_eval.types import ScoredSample
    from evr1_eval.viewer import _record

    backend = ScriptedBackend(SCRIPT)
    request = Request(id="q", prompt="?", videos=())
    out = asyncio.run(run_agent(backend, request, GenerationParams(), _agent(tmp_path), str(clip)))
    row = ScoredSample(id="q", benchmark="tiny", problem_type="multiple_choice", response=out.final, extracted="B",
                       score=1.0, details={"agent": out.record})  # fmt: skip
    text = _record(row, None, None, None, False, None).responses[0].text or ""
    assert "[turn 1] Looking." in text
    assert "-> get_frames(start=0.5, end=2.5, n=4): video at " in text
    assert "-> zoom(time=1.0, box=[0.0, 0.0, 0.5, 0.5]): image at " in text
    assert "[turn 3] B" in text


def test_cli_run_with_tools(tmp_path: Path, clip: Path) -> None:
    """`evr1-eval run --tools get_frames,zoom --tool-max-turns 2` end to end (fake backend that always calls)."""
    from evr1_eval.cli import main

    ann = tmp_path / "ann"
    ann.mkdir()
    row = {"problem_id": "p0", "problem": "What is shown?", "options": ["A. a digit", "B. a cat"],
           "solution": "<answer>A</answer>", "problem_type": "multiple choice", "path": str(clip), "data_type": "video"}  # fmt: skip
    (ann / "mvbench.json").write_text(json.dumps([row]), encoding="utf-8")
    calling = HERMES.render_call(ToolCall("get_frames", {"start": 0.0, "end": 1.5, "n": 4}))
    out = tmp_path / "run"
    (tmp_path / "cache").mkdir()  # the tools' streams are cached on first use
    code = main(["run", "--model", "fake-model", "--backend", "fake", "--engine-kwargs", json.dumps({"response": calling}),
                 "--allow-outside-media",  # the shared clip lies outside the annotations' folder
                 "--benchmarks", "mvbench", "--annotations-dir", str(ann), "--out", str(out), "--no-progress",
                 "--cache-dir", str(tmp_path / "cache"), "--sampling", "max_pixels=3136", "--sampling", "min_pixels=784",
                 "--tools", "get_frames,zoom", "--tool-max-turns", "2"])  # fmt: skip
    assert code == 0
    (line,) = (out / "mvbench" / "results.jsonl").read_text().splitlines()
    agent = json.loads(line)["details"]["agent"]
    assert len(agent["turns"]) == 2
    assert agent["turns"][0]["calls"][0]["ok"] is True
    assert agent["finished"] is False
    assert json.loads(line)["score"] == 0.0  # out of turns without an answer
    fingerprint = json.loads((out / "mvbench" / "run.json").read_text())["fingerprint"]
    assert fingerprint["agent"]["tools"] == ["get_frames", "zoom"]
    # the HTML viewer shows, after the prompt's frames, the frames each call returned: those positions of the
    # tool's cached stream, labelled with the call
    site = tmp_path / "site"
    assert main(["report", str(out), "--out", str(tmp_path / "rep"), "--chart", "none", "--html", str(site),
                 "--annotations-dir", str(ann), "--cache-dir", str(tmp_path / "cache")]) == 0  # fmt: skip
    cards = "".join(p.read_text() for p in sorted(site.glob("data/*/chunk-*.js")))
    call = agent["turns"][0]["calls"][0]
    assert call["media"][0]["stream"] == "frames"
    assert len(call["media"][0]["positions"]) == 4
    assert "turn 1: get_frames(start=0.0, end=1.5, n=4) returned these frames" in cards
    assert "turn 2: get_frames(start=0.0, end=1.5, n=4) returned these frames" in cards
    first = cards[: cards.index("turn 1: get_frames")]
    strip = first[first.rindex('<figure class=\\"strip\\"') :]  # the strip this caption closes
    shown = re.findall(r"thumbs/[0-9a-f]+/(\d{5})\.jpg", strip)
    assert shown == [f"{p:05d}" for p in call["media"][0]["positions"]]
    thumbs = sorted(p.name for p in site.glob("thumbs/*/*.jpg"))
    assert len(thumbs) >= 4 + 1  # the tool's frames (from its stream's entry) besides the prompt's
