"""Evaluation with tools: a sample's answer after up to K turns of `evr1_cache.tools` calls, every turn recorded.

The same tool layer as training (`ToolSession`: the same parsing, validation, budgets and cached frames), driven over
any backend through its one `generate(Request)`: after each turn that calls tools, the model's text and the tools'
answer (`CallFormat.response_content`: text and media items) join the request's `history`, and the returned clip or
crop joins its videos / images, so the next request is the whole conversation with every frame in order. The answer
scored is the last turn's text outside any call; the record (calls, arguments, returned frame timestamps, errors,
counts) goes into the row's `details["agent"]`.

Names (stable): AgentEval, AgentOutcome, run_agent, parse_tools
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from evr1_cache import MediaLoader
from evr1_cache.tools import ToolBudget, ToolConfig, ToolSession, get_tool
from evr1_eval.backends.base import Backend, GenerationParams, ImageInput, Request, VideoInput
from evr1_eval.types import Generation

__all__ = ["AgentEval", "AgentOutcome", "media_limit", "parse_tools", "run_agent"]


def parse_tools(text: str) -> tuple[str, ...]:
    """`--tools get_frames,zoom` -> the registered names (a typo is a KeyError with the closest names)."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise ValueError("--tools needs at least one tool name (e.g. get_frames,zoom)")
    return tuple(get_tool(n).name for n in names)


def media_limit(budget: ToolBudget | None = None) -> dict[str, int]:
    """Media items one request may hold with tools (vLLM's `limit_mm_per_prompt`): the sample's own, plus one clip or
    crop per call the episode's budget allows."""
    calls = (budget or ToolBudget()).calls_per_episode
    return {"video": 1 + calls, "image": 1 + calls}


@dataclass(frozen=True)
class AgentEval:
    """How samples are answered with tools: which tools, at most `max_turns` model turns, the budgets and sampling,
    and the loader the tools read frames through (written through on first use)."""

    tools: tuple[str, ...]
    loader: MediaLoader
    max_turns: int = 4
    budget: ToolBudget = field(default_factory=ToolBudget)
    #: the tools' settings; its `family` sizes their frames and picks the call format
    config: ToolConfig = field(default_factory=ToolConfig)
    #: tokens per model turn (a trained agent's `max_turn_tokens`); None: the run's --max-tokens alone
    max_turn_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError(f"--tool-max-turns must be >= 1, got {self.max_turns}")

    def settings(self) -> dict[str, Any]:
        """What changes a score (part of the run's fingerprint: rows with and without tools never mix)."""
        return {
            "tools": list(self.tools),
            "max_turns": self.max_turns,
            "budget": dataclasses.asdict(self.budget),
            "config": dataclasses.asdict(self.config),
            **({"max_turn_tokens": self.max_turn_tokens} if self.max_turn_tokens is not None else {}),
        }


@dataclass(frozen=True)
class AgentOutcome:
    """The answer to score, the engine's numbers over all turns and the record of every turn."""

    final: str
    generation: Generation
    record: dict[str, Any]


async def run_agent(
    backend: Backend, request: Request, params: GenerationParams, agent: AgentEval, video: str
) -> AgentOutcome:
    """Up to `agent.max_turns` turns of `request` with tools over `video` (the sample's first video)."""
    session = ToolSession(
        agent.loader.resolve(video), agent.loader, tools=agent.tools, config=agent.config, budget=agent.budget
    )
    system = session.system_text() if not request.system else f"{request.system}\n\n{session.system_text()}"
    current = dataclasses.replace(request, system=system, history=())
    history: list[tuple[str, tuple[dict[str, Any], ...]]] = []
    videos, images = list(request.videos), list(request.images)
    if agent.max_turn_tokens is not None:
        params = dataclasses.replace(params, max_tokens=min(params.max_tokens, int(agent.max_turn_tokens)))
    final, prompt_tokens, completion_tokens, finish = "", 0, 0, None
    said: list[str] = []
    for turn in range(agent.max_turns):
        gen = await backend.generate(current, params)
        prompt_tokens += gen.prompt_tokens
        completion_tokens += gen.completion_tokens
        finish = gen.finish_reason
        said.append(gen.text)
        answer = session.answer(gen.text)
        if answer.final:
            final = answer.parsed.content
            break
        if turn == agent.max_turns - 1:
            break
        for result in answer.results:
            for media in result.media:
                if media.kind == "image":
                    images.append(ImageInput(pixels=media.frames))
                elif media.meta is not None:
                    videos.append(VideoInput(frames=media.frames, metadata=media.meta.to_hf()))
        history.append((gen.text, tuple(session.format.response_content(answer.results))))
        current = dataclasses.replace(current, history=tuple(history), videos=tuple(videos), images=tuple(images))
    record = session.record()
    for turn_record, text in zip(record["turns"], said, strict=True):
        turn_record["said"] = text
    record.update(final_text=final, finished=bool(session.turns and session.turns[-1].final))
    gen_all = Generation(
        text=final, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, finish_reason=finish
    )
    return AgentOutcome(final, gen_all, record)
