"""What a sandbox run takes and gives back: limits, one job, its result, and the backend interface."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from evr1_rewards.errors import RewardConfigError


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Per-run limits, enforced inside the boundary for the sandbox's own uid. Defaults suit contest-style tests.

    `cpu_seconds` (RLIMIT_CPU), `memory_bytes` (address space per process), `file_bytes` (largest file written),
    `processes` (processes + threads of the sandbox uid), `open_files`, `tmpfs_bytes` (the private /tmp),
    `output_bytes` (stdout kept; more kills the run), `wall_seconds` (per run, then everything in it is killed).
    """

    cpu_seconds: int = 5
    wall_seconds: float = 10.0
    memory_bytes: int = 1 << 30
    file_bytes: int = 16 << 20
    processes: int = 32
    open_files: int = 256
    tmpfs_bytes: int = 64 << 20
    output_bytes: int = 4 << 20

    def as_payload(self) -> dict[str, int]:
        return {
            "cpu_seconds": max(1, int(self.cpu_seconds)),
            "memory_bytes": int(self.memory_bytes),
            "file_bytes": int(self.file_bytes),
            "processes": int(self.processes),
            "open_files": int(self.open_files),
        }


Step = tuple[Literal["exec", "probe"], "str | list[str]"]
"""A test step run after the program: ("exec", set-up source) or ("probe", [expression, ...])."""


@dataclass(frozen=True, slots=True)
class Job:
    """One run: the program on `stdin`; with `steps`, a probe run whose values come back in `RunResult.probes`."""

    program: str
    stdin: str = ""
    steps: Sequence[Step] | None = None


@dataclass(frozen=True, slots=True)
class RunResult:
    """What happened to one run. `probes`: the raw tagged-JSON text of a probe run's values (None: none came back)."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    output_truncated: bool
    wall_seconds: float
    probes: str | None = None
    error: str | None = None
    """Set when the sandbox itself failed (could not start, remote service down): not the program's fault."""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.output_truncated and self.error is None


class SandboxUnavailableError(RewardConfigError):
    """No kernel boundary is available for the `code` type (and `unsafe_local` was not chosen)."""


class Backend(Protocol):
    """Runs one job behind some boundary. Never raises because of the program; thread-safe."""

    name: str

    def run(self, job: Job, limits: SandboxLimits) -> RunResult: ...
