"""Rewards for tool-using (multi-turn) episodes: the router's final-answer reward plus optional, non-positive shaping.

Why shaping can only subtract: an agent's reward must come from its answer. A cost per call and a penalty per
invalid call (bad arguments, over budget, malformed call text) steer it toward fewer, valid calls, and because each
term is >= 0 and subtracted, no sequence of tool calls can raise an episode's reward above what its final answer
earns (the episode's answer is the last turn's text outside any call; tool outputs are never scored). Every term is
reported on its own (`AgentReward.as_dict`) so the metrics show what the answer earned and what the calls cost.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from evr1_rewards.errors import RewardConfigError
from evr1_rewards.types import RewardResult

__all__ = ["AgentReward", "AgentShaping", "agent_reward"]


def _cost(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise RewardConfigError(
            f"AgentShaping.{name} must be a finite number >= 0 (it is subtracted; a negative cost would pay the "
            f"model for calling tools), got {value!r}"
        )
    return float(value)


@dataclass(frozen=True)
class AgentShaping:
    """Shaping of an agent episode's reward (all off by default).

    `call_cost` is subtracted per tool call beyond `free_calls`; `invalid_call_penalty` per invalid or malformed
    call; `max_shaping` caps the total subtracted (so a long, failed exploration cannot outweigh a right answer).
    """

    call_cost: float = 0.0
    free_calls: int = 0
    invalid_call_penalty: float = 0.0
    max_shaping: float = 1.0

    def __post_init__(self) -> None:
        for name in ("call_cost", "invalid_call_penalty", "max_shaping"):
            object.__setattr__(self, name, _cost(name, getattr(self, name)))
        free = self.free_calls
        if isinstance(free, bool) or not isinstance(free, int) or free < 0:
            raise RewardConfigError(f"AgentShaping.free_calls must be an integer >= 0, got {free!r}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> AgentShaping:
        """From a config node; an unknown key is an error naming the known ones."""
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(data or {}) - set(known))
        if unknown:
            raise RewardConfigError(f"agent shaping has no setting(s) {unknown}; known: {', '.join(known)}")
        return cls(**dict(data or {}))


@dataclass(frozen=True)
class AgentReward:
    """An episode's reward: `overall = answer - shaping`, each part kept for the metrics."""

    overall: float
    answer: float
    accuracy: float
    format: float
    call_cost: float
    invalid_penalty: float
    calls: int
    invalid: int

    def as_dict(self) -> dict[str, float]:
        """Fixed keys (what trainers log and stack across a batch)."""
        return {
            "overall": self.overall,
            "answer": self.answer,
            "accuracy": self.accuracy,
            "format": self.format,
            "tool_call_cost": self.call_cost,
            "tool_invalid_penalty": self.invalid_penalty,
            "tool_calls": float(self.calls),
            "tool_invalid": float(self.invalid),
        }


def agent_reward(answer: RewardResult, calls: int, invalid: int, shaping: AgentShaping | None = None) -> AgentReward:
    """The episode's reward from the router's result on its final answer and its call counts (`invalid` counts
    refused and malformed calls; both counts are clamped at 0)."""
    s = shaping or AgentShaping()
    calls, invalid = max(0, int(calls)), max(0, int(invalid))
    cost = s.call_cost * max(0, calls - s.free_calls)
    penalty = s.invalid_call_penalty * invalid
    total = min(cost + penalty, s.max_shaping)
    scale = total / (cost + penalty) if cost + penalty > 0 else 0.0
    return AgentReward(
        overall=answer.overall - total,
        answer=answer.overall,
        accuracy=answer.accuracy,
        format=answer.format,
        call_cost=cost * scale,
        invalid_penalty=penalty * scale,
        calls=calls,
        invalid=invalid,
    )
