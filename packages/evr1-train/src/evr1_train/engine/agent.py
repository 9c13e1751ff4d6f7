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
run_episodes, episode_logprobs, tool_instructions, tool_session,
tool_turn_text
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import torch

from evr1_cache.registry import check_fields
from evr1_cache.tools import (
    DEFAULT_TOOLS,
    ToolBudget,
    ToolConfig,
    ToolResult,
    ToolSession,
    call_format,
    tool_schemas,
)
from evr1_rewards import AgentShaping
from evr1_train.engine.batch import EncodedPrompt, collate_vision, encode_text, pad_responses
from evr1_train.engine.policy import Runtime, generate

if TYPE_CHECKING:  # a type only: importing the data package loads verl, whose plugin scan imports this module
    from evr1_train.data.options import DataOptions

__all__ = [
    "AgentSettings",
    "Episode",
    "ModelPolicy",
    "ScriptedPolicy",
    "Segment",
    "TurnPolicy",
    "episode_logprobs",
    "run_episode",
    "run_episodes",
    "tool_instructions",
    "tool_session",
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
        check_fields("evr1.agent", node, cls)
        if "budget" in node:
            node["budget"] = ToolBudget.from_mapping(node["budget"])
        if "tool_config" in node:
            node["tool_config"] = ToolConfig(**dict(node["tool_config"] or {}))
        if "shaping" in node:
            node["shaping"] = AgentShaping.from_mapping(node["shaping"])
        if "tools" in node:
            node["tools"] = tuple(node["tools"])
        return cls(**node)

    def record(self) -> dict[str, Any]:
        """What an evaluator needs to give a trained agent the same tools (the protocol record's `agent`; the
        shaping is training-only): JSON-ready."""
        record = {k: v for k, v in dataclasses.asdict(self).items() if k != "shaping"}
        return {**record, "tools": list(self.tools)}


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
    session: ToolSession | None  # None: no tools for this prompt (no video, or none offered): one turn
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
        tools = self.session.record() if self.session is not None else {"turns": [], "stats": {}}
        return {**tools, "finished": self.finished, "final_text": self.final_text}

    @property
    def served(self) -> int:
        """Tool calls answered with frames (0 without tools)."""
        return self.session.stats.served if self.session is not None else 0


def _types(segment: Segment) -> torch.Tensor:
    return segment.types if segment.types is not None else torch.zeros_like(segment.ids)


class TurnPolicy(Protocol):
    """Produces one model turn for each of several episodes (token ids, ending with an end-of-turn token when the
    turn ends) from their contexts; `slots` name the episodes (a scripted policy replays each one's own turns)."""

    def __call__(
        self, slots: Sequence[int], contexts: Sequence[EncodedPrompt], max_new_tokens: int
    ) -> list[list[int]]: ...


@dataclass
class ModelPolicy:
    """Samples the turns of all active episodes from the model in one batched `engine.policy.generate`
    (vision placeholders suppressed)."""

    model: Any
    pad_id: int
    eos: Sequence[int]
    runtime: Runtime
    do_sample: bool = True
    temperature: float = 1.0
    suppress: Sequence[int] = ()
    top_p: float = 1.0
    top_k: int = -1

    def __call__(self, slots: Sequence[int], contexts: Sequence[EncodedPrompt], max_new_tokens: int) -> list[list[int]]:
        return generate(
            self.model,
            list(contexts),
            pad_id=self.pad_id,
            eos=self.eos,
            max_new_tokens=max_new_tokens,
            do_sample=self.do_sample,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            runtime=self.runtime,
            suppress=self.suppress,
        )


@dataclass
class ScriptedPolicy:
    """Replays stored assistant turns (an expert trajectory with tool calls, or a test's script), each followed by
    the end-of-turn token; the tools' answers are recomputed from the cache, so they are the ones a rollout gets.
    `turns`: one script (every slot replays it) or one script per slot."""

    tokenizer: Any
    turns: Sequence[str] | Sequence[Sequence[str]]
    eos_id: int
    _next: dict[int, int] = field(default_factory=dict)

    def script(self, slot: int) -> list[str]:
        turns = list(self.turns)
        if turns and not isinstance(turns[0], str):  # one script per slot
            return [str(t) for t in turns[slot]]
        return [str(t) for t in turns]  # one script for every slot

    def __call__(self, slots: Sequence[int], contexts: Sequence[EncodedPrompt], max_new_tokens: int) -> list[list[int]]:
        out = []
        for slot in slots:
            turns, at = self.script(slot), self._next.get(slot, 0)
            if at >= len(turns):
                raise IndexError(f"the scripted trajectory has {len(turns)} turns; the episode asked for more")
            self._next[slot] = at + 1
            ids = [int(i) for i in self.tokenizer.encode(turns[at], add_special_tokens=False)]
            out.append([*ids[: max_new_tokens - 1], self.eos_id])
        return out


def tool_instructions(settings: AgentSettings, family: str | None) -> str:
    """The system-turn text that offers `settings.tools` in the family's call format ("" when none are offered)."""
    if not settings.tools:
        return ""
    return call_format(settings.tool_config.family or family).system_text(tool_schemas(settings.tools))


def tool_session(
    messages: Sequence[Mapping[str, Any]], opts: DataOptions, settings: AgentSettings, family: str | None
) -> ToolSession | None:
    """The tools of one episode over the prompt's first video (both engines), None when the prompt has no video or
    no tools are offered (the episode is then a single turn). `family` names the call format (`tool_config.family`
    wins when set)."""
    from evr1_train.data.row import media_items, tool_loader

    videos = [item for item in media_items(list(messages)) if item["type"] == "video"]
    if not videos or not settings.tools:
        return None
    loader = tool_loader(opts)
    return ToolSession(
        loader.resolve(videos[0]["video"]),
        loader,
        tools=settings.tools,
        config=settings.tool_config,
        budget=settings.budget,
        family=settings.tool_config.family or family,
    )


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
    enc = encode_text(processor, text, images, videos, family)
    return Segment(enc.input_ids, enc.token_types, enc.vision, trained=False)


def run_episode(
    policy: TurnPolicy,
    processor: Any,
    prompt: EncodedPrompt,
    session: ToolSession,
    settings: AgentSettings,
    family: Any = None,
) -> Episode:
    """One episode (`run_episodes` with one slot)."""
    return run_episodes(policy, processor, [prompt], [session], settings, family)[0]


def run_episodes(
    policy: TurnPolicy,
    processor: Any,
    prompts: Sequence[EncodedPrompt],
    sessions: Sequence[ToolSession | None],
    settings: AgentSettings,
    family: Any = None,
) -> list[Episode]:
    """Episodes of up to `settings.max_turns` model turns, the turns of all still-active episodes generated in one
    batch; after each turn that calls tools, their answers are appended.

    An episode ends at a turn without calls (its text outside calls is the answer), after the last turn, or when
    the next tool answer would not fit `max_response_tokens` (the model's last turn then stays the last segment)."""
    if len(prompts) != len(sessions):
        raise ValueError(f"{len(prompts)} prompts but {len(sessions)} tool sessions")
    episodes = [Episode(p, s) for p, s in zip(prompts, sessions, strict=True)]
    used = [0] * len(episodes)
    active = list(range(len(episodes)))
    tokenizer = processor.tokenizer
    for turn in range(settings.max_turns):
        rooms = {i: min(settings.max_turn_tokens, settings.max_response_tokens - used[i]) for i in active}
        active = [i for i in active if rooms[i] >= 1]
        if not active:
            break
        # one batch per turn; the batch generates up to the largest room and each turn is cut to its own
        outs = policy(active, [episodes[i].context() for i in active], max(rooms[i] for i in active))
        still: list[int] = []
        for i, ids in zip(active, outs, strict=True):
            ids = ids[: rooms[i]]
            episode = episodes[i]
            types = None if episode.prompt.token_types is None else torch.zeros(len(ids), dtype=torch.long)
            episode.segments.append(Segment(torch.tensor(ids, dtype=torch.long), types, {}, True))
            used[i] += len(ids)
            text = tokenizer.decode(ids, skip_special_tokens=True)
            if episode.session is None:  # no tools: the first turn is the answer
                episode.final_text, episode.finished = text, True
                continue
            answer = episode.session.answer(text)
            if answer.final:
                episode.final_text, episode.finished = answer.parsed.content, True
                continue
            if turn == settings.max_turns - 1:
                continue
            tools = encode_tool_turn(processor, family, answer.results, episode.session.format)
            if used[i] + int(tools.ids.shape[0]) >= settings.max_response_tokens:
                continue
            episode.segments.append(tools)
            used[i] += int(tools.ids.shape[0])
            still.append(i)
        active = still
    return episodes


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
    mask, _ = pad_responses([e.loss_mask for e in episodes], 0, logp.shape[1])  # 0-padded, cut to the width
    return logp, mask.to(logp.device)
