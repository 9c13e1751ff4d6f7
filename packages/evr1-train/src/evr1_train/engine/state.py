"""The resumable state of a local run as plain values: what `LocalTrainer.state_dict()` returns and takes back.

Why its own module: the trainer produces and consumes this state, `checkpoint` writes and reads it, and neither needs
the other — `checkpoint` does disk I/O only and never touches a trainer.

Names (stable): TrainState, TrainerState, capture_rng(), restore_rng(), rng_key(), device_index()
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

CPU_KEY = "torch_cpu"
_CUDA_PREFIX = "cuda."


@dataclass
class TrainState:
    """Everything besides weights and optimiser moments that a resumed run needs (JSON-serialisable)."""

    step: int = 0
    epoch: int = 0
    position: int = 0
    kl_coef: float = 0.0
    wall_s: float = 0.0
    history: list[dict[str, float]] = field(default_factory=list)  # validation results per step
    skipped_rows: int = 0


@dataclass(frozen=True)
class TrainerState:
    """A trainer's full state, by kind of storage.

    model: the trainable weights by parameter name (all of them, or only the LoRA adapter's).
    optimizer / scheduler: torch's own `state_dict()`s (tensors inside `optimizer["state"]`).
    trainer: `TrainState` as a dict. rng: generator states by `rng_key` (CPU, and one per CUDA device index).
    python_random: `random.getstate()`.
    """

    model: Mapping[str, torch.Tensor]
    optimizer: Mapping[str, Any]
    scheduler: Mapping[str, Any]
    trainer: Mapping[str, Any]
    rng: Mapping[str, torch.Tensor]
    python_random: tuple[Any, ...]


def rng_key(device_index: int) -> str:
    """The key of CUDA device `device_index`'s generator state (`cuda.0`, `cuda.1`, ..., `cuda.10`)."""
    return f"{_CUDA_PREFIX}{device_index}"


def device_index(key: str) -> int | None:
    """The CUDA device index a key names (`cuda.10` -> 10), None for other keys."""
    return int(key[len(_CUDA_PREFIX) :]) if key.startswith(_CUDA_PREFIX) else None


def capture_rng(cuda_states: list[torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """CPU generator state plus each CUDA device's state keyed by its index (`cuda_states[i]` is device i)."""
    if cuda_states is None:
        cuda_states = list(torch.cuda.get_rng_state_all()) if torch.cuda.is_available() else []
    return {CPU_KEY: torch.random.get_rng_state(), **{rng_key(i): st for i, st in enumerate(cuda_states)}}


def restore_rng(
    states: Mapping[str, torch.Tensor], set_cuda: Callable[[torch.Tensor, int], None] | None = None
) -> list[int]:
    """Restore the CPU state and every CUDA state onto the device its key names; returns the device indices set.

    Each state goes to its own device index (never by position in a sorted list of names). `set_cuda(state, index)`
    defaults to `torch.cuda.set_rng_state`; CUDA states are skipped when no CUDA device is present.
    """
    torch.random.set_rng_state(states[CPU_KEY])
    if set_cuda is None:
        if not torch.cuda.is_available():
            return []
        count = torch.cuda.device_count()

        def set_cuda(state: torch.Tensor, index: int) -> None:
            if index < count:
                torch.cuda.set_rng_state(state, device=index)

    done = []
    for key, state in states.items():
        index = device_index(key)
        if index is not None:
            set_cuda(state, index)
            done.append(index)
    return sorted(done)


def python_random_to_json(state: tuple[Any, ...]) -> list[Any]:
    version, internal, gauss = state
    return [version, list(internal), gauss]


def python_random_from_json(data: list[Any]) -> tuple[Any, ...]:
    version, internal, gauss = data
    return (version, tuple(internal), gauss)
