"""Multi-turn agent episodes in the local engine: generate, run the tools, append their frames, repeat up to K turns.

An episode is the prompt followed by segments: the model's turns (trained, loss mask 1) and the tools' answers (text
and vision placeholders with their pixels, loss mask 0). Each tool answer is rendered by the model's own chat template
as a user turn (the family's call format wraps it: `<tool_response>` for Qwen) and run through the processor with the
returned frames, so its tokens, vision tensors and `mm_token_type_ids` are exactly what one processor call over the
whole conversation gives. Generation and the training forward both see the full sequence with every grid in order,
so M-RoPE positions continue across turns by the model's own rule (`evr1_cache.mrope` for Qwen2/2.5-VL): text after
a tool's video starts one past the video's largest position, as in a single-turn prompt.

Tools are `evr1_cache.tools` (one definition, shared with verl and the evaluator); the reward is
`evr1_rewards.agent_reward` on the last turn's text outside any call.

Names (stable): AgentSettings, Episode, Segment, TurnPolicy, ModelPolicy, ScriptedPolicy, run_episode,
episode_logprobs, tool_turn_text
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from evr1_cache.tools import DEFAULT_TOOLS, ToolBudget, ToolConfig, ToolResult, ToolSession
from evr1_rewards import AgentShaping
from evr1_train.engine.batch import EncodedPrompt, collate_vision, video_kwargs
from evr1_train.engine.policy import Runtime, generate

__all__ = [
    "AgentSettings",
    "Episode",
    "ModelPolicy",
    "ScriptedPolicy",
    "Segment",
    "TurnPolicy",
    "episode_logprobs",
    "run_episode",
    "tool_turn_text",
]


@dataclass(frozen=True)
class AgentSettings:
    """An episode's limits: `max_turns` model turns of at most `max_turn_tokens` tokens each, `max_response_tokens`
    after the prompt (model and tool tokens together), the tools offered, their budgets and sampling, and the
    reward's shaping (`evr1_rewards.AgentShaping`). Config node: `evr1.agent`."""

    max_turns: int = 3
    max_turn_tokens: int = 128
    max_response_tokens: int = 4096
    tools: tuple[str, ...] = DEFAULT_TOOLS
    budget: ToolBudget = field(default_factory=ToolBudget)
    tool_config: ToolConfig = field(default_factory=ToolConfig)
    shaping: AgentShaping = field(default_factory=AgentShaping)

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_turn_tokens", "max_response_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"agent.{name} must be an integer >= 1, got {value!r}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> AgentSettings:
        """From the `evr1.agent` config node: budget / tool_config sub-nodes, the rest by name."""
        node = dict(data or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(node) - known)
        if unknown:
            raise ValueError(f"evr1.agent has no setting(s) {unknown}; known: {', '.join(sorted(known))}")
        if "budget" in node:
            node["budget"] = ToolBudget.from_mapping(node["budget"])
        if "tool_config" in node:
            node["tool_config"] = ToolConfig(**dict(node["tool_config"] or {}))
        if "shaping" in node:
            node["shaping"] = AgentShaping.from_mapping(node["shaping"])
        if "tools" in node:
            node["tools"] = tuple(node["tools"])
        return cls(**node)


@dataclass(frozen=True)
class Segment:
    """A span of the episode after the prompt: token ids `[S]`, their `mm_token_type_ids` (None when the processor
    gives none), the vision tensors its placeholders stand for, and whether the loss trains on it."""

    ids: torch.Tensor
    types: torch.Tensor | None
    vision: dict[str, torch.Tensor]
    trained: bool


@dataclass
class Episode:
    """One multi-turn rollout: the prompt, its segments in order, the tool session (calls, stats) and the answer."""

    prompt: EncodedPrompt
    session: ToolSession
    segments: list[Segment] = field(default_factory=list)
    final_text: str = ""
    finished: bool = False  # ended with a turn that called no tool (else: out of turns or tokens)

    @property
    def response_ids(self) -> list[int]:
        return [int(t) for s in self.segments for t in s.ids.tolist()]

    @property
    def loss_mask(self) -> list[int]:
        """1 on the model's tokens, 0 on the tools' (text and vision)."""
        return [int(s.trained) for s in self.segments for _ in range(int(s.ids.shape[0]))]

    @property
    def response_types(self) -> list[int] | None:
        if self.prompt.token_types is None:
            return None
        return [int(t) for s in self.segments for t in _types(s).tolist()]

    def context(self) -> EncodedPrompt:
        """The prompt and every segment as one prompt: what the next turn is generated from."""
        parts = [self.prompt, *(EncodedPrompt(s.ids, s.vision, s.types) for s in self.segments)]
        ids = torch.cat([p.input_ids for p in parts])
        types = None
        if self.prompt.token_types is not None:
            types = torch.cat([self.prompt.token_types, *(_types(s) for s in self.segments)])
        return EncodedPrompt(ids, collate_vision(parts, "cpu"), types)

    def training_prompt(self) -> EncodedPrompt:
        """The prompt's ids with the vision tensors of the whole episode (prompt's, then each tool's, in order): the
        left part of a `[prompt | response]` training row whose response holds the tools' placeholders."""
        parts = [self.prompt, *(EncodedPrompt(s.ids, s.vision, s.types) for s in self.segments)]
        return EncodedPrompt(self.prompt.input_ids, collate_vision(parts, "cpu"), self.prompt.token_types)

    def record(self) -> dict[str, Any]:
        """Turns, calls, returned frame timestamps, errors and counts (JSON-ready)."""
        return {**self.session.record(), "finished": self.finished, "final_text": self.final_text}


def _types(segment: Segment) -> torch.Tensor:
    return segment.types if segment.types is not None else torch.zeros_like(segment.ids)


class TurnPolicy(Protocol):
    """Produces one model turn (token ids, ending with an end-of-turn token when it ends) from the context."""

    def __call__(self, context: EncodedPrompt, max_new_tokens: int) -> list[int]: ...


@dataclass
class ModelPolicy:
    """Samples a turn from the model (`engine.policy.generate`, vision placeholders suppressed)."""

    model: Any
    pad_id: int
    eos: Sequence[int]
    runtime: Runtime
    do_sample: bool = True
    temperature: float = 1.0
    suppress: Sequence[int] = ()

    def __call__(self, context: EncodedPrompt, max_new_tokens: int) -> list[int]:
        (ids,) = generate(
            self.model,
            [context],
            pad_id=self.pad_id,
            eos=self.eos,
            max_new_tokens=max_new_tokens,
            do_sample=self.do_sample,
            temperature=self.temperature,
            runtime=self.runtime,
            suppress=self.suppress,
        )
        return ids


@dataclass
class ScriptedPolicy:
    """Replays stored assistant turns (an expert trajectory with tool calls, or a test's script), each followed by
    the end-of-turn token; the tools' answers are recomputed from the cache, so they are the ones a rollout gets."""

    tokenizer: Any
    turns: Sequence[str]
    eos_id: int
    _next: int = 0

    def __call__(self, context: EncodedPrompt, max_new_tokens: int) -> list[int]:
        if self._next >= len(self.turns):
            raise IndexError(f"the scripted trajectory has {len(self.turns)} turns; the episode asked for more")
        text = self.turns[self._next]
        self._next += 1
        ids = [int(i) for i in self.tokenizer.encode(text, add_special_tokens=False)]
        return [*ids[: max_new_tokens - 1], self.eos_id]


def tool_turn_text(processor: Any, results: Sequence[ToolResult], response: Any) -> str:
    """The text after a model turn's end-of-turn token up to the next assistant header: the tools' answers as a
    user turn rendered by the model's chat template (media as the template's image/video items, in order).

    Found as the difference of two renderings (a conversation with and without the answer turn), so the template's
    own separators are kept; `response` is the family's `CallFormat` (its `<tool_response>` tags)."""
    content = response.response_content(results)
    before = [{"role": "user", "content": "."}, {"role": "assistant", "content": "."}]
    head = processor.apply_chat_template(before, tokenize=False, add_generation_prompt=False)
    full = processor.apply_chat_template(
        [*before, {"role": "user", "content": content}], tokenize=False, add_generation_prompt=True
    )
    if not full.startswith(head):
        raise ValueError("the chat template renders earlier turns differently when a turn is added; cannot append")
    cut = head.rstrip()  # the generated turn ends with the end-of-turn token: the template's separator follows it
    return str(head[len(cut) :] + full[len(head) :])


def encode_tool_turn(processor: Any, family: Any, results: Sequence[ToolResult], response: Any) -> Segment:
    """The tools' answers as an untrained segment: ids with expanded placeholders, types and vision tensors."""
    text = tool_turn_text(processor, results, response)
    images = [m.frames for r in results for m in r.media if m.kind == "image"]
    videos = [(m.frames, m.meta) for r in results for m in r.media if m.kind == "video"]
    kwargs: dict[str, Any] = {"images": list(images)} if images else {}
    kwargs.update(video_kwargs(videos))
    if family is not None:
        kwargs.update(family.hf_kwargs([m for _, m in videos], images=bool(images)))
    out = processor(text=[text], return_tensors="pt", **kwargs)
    from evr1_train.engine.batch import VISION_KEYS

    vision = {k: out[k] for k in VISION_KEYS if k in out and out[k] is not None}
    types = out.get("mm_token_type_ids")
    return Segment(out["input_ids"][0], None if types is None else types[0], vision, trained=False)


def run_episode(
    policy: TurnPolicy,
    processor: Any,
    prompt: EncodedPrompt,
    session: ToolSession,
    settings: AgentSettings,
    family: Any = None,
) -> Episode:
    """Up to `settings.max_turns` model turns; after each turn that calls tools, their answers are appended.

    The episode ends at a turn without calls (its text outside calls is the answer), after the last turn, or when
    the next tool answer would not fit `max_response_tokens` (the model's last turn then stays the last segment)."""
    episode = Episode(prompt, session)
    tokenizer = processor.tokenizer
    used = 0
    for turn in range(settings.max_turns):
        room = min(settings.max_turn_tokens, settings.max_response_tokens - used)
        if room < 1:
            break
        ids = policy(episode.context(), room)
        episode.segments.append(Segment(torch.tensor(ids, dtype=torch.long), _text_types(ids, prompt), {}, True))
        used += len(ids)
        answer = session.answer(tokenizer.decode(ids, skip_special_tokens=True))
        if answer.final:
            episode.final_text, episode.finished = answer.parsed.content, True
            break
        if turn == settings.max_turns - 1:
            break
        tools = encode_tool_turn(processor, family, answer.results, session.format)
        if used + int(tools.ids.shape[0]) >= settings.max_response_tokens:
            break
        episode.segments.append(tools)
        used += int(tools.ids.shape[0])
    return episode


def _text_types(ids: Sequence[int], prompt: EncodedPrompt) -> torch.Tensor | None:
    return None if prompt.token_types is None else torch.zeros(len(ids), dtype=torch.long)


def episode_logprobs(
    model: Any, episodes: Sequence[Episode], *, pad_id: int, temperature: float, runtime: Runtime
) -> tuple[torch.Tensor, torch.Tensor]:
    """log pi of every response token `[B, R]` in one forward per batch, and the loss mask `[B, R]` (tool tokens 0).

    The forward sees each episode whole (`[prompt | model and tool turns]`, all vision in order), so the log-probs of
    a later turn are conditioned on the frames the tools returned, at their M-RoPE positions."""
    from evr1_train.engine.policy import token_logprobs

    prompts = [e.training_prompt() for e in episodes]
    responses = [e.response_ids for e in episodes]
    types = [t for t in (e.response_types for e in episodes) if t is not None]
    logp, _, _ = token_logprobs(
        model,
        prompts,
        responses,
        pad_id=pad_id,
        temperature=temperature,
        runtime=runtime,
        response_types=types if len(types) == len(episodes) else None,
    )
    width = logp.shape[1]
    mask = torch.zeros((len(episodes), width), dtype=torch.long)
    for i, e in enumerate(episodes):
        m = e.loss_mask[:width]
        mask[i, : len(m)] = torch.tensor(m, dtype=torch.long)
    return logp, mask.to(logp.device)
