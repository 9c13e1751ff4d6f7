"""Running untrusted programs behind a kernel boundary, with the checker outside.

Backends (`SandboxConfig`, see `evr1_rewards.sandbox.config`): bubblewrap locally (`sandbox.bwrap`), a SandboxFusion
service on clusters (`sandbox.fusion`), or — explicitly, for trusted data — `unsafe_local` (`sandbox.unsafe`).
Without a boundary, code answers are refused with `SandboxUnavailableError`.

Every run is one job: the program plus a stdin, or plus test *steps* whose probe values come back as data
(`sandbox._harness`). Nothing that decides a test — expected outputs, comparisons — ever enters the sandbox: the
parent compares (`evr1_rewards.scorers.code`). The jobs of one answer run in parallel up to the backend's worker
limit, and an answer's deadline bounds them all, so a program that sleeps in every test costs one timeout, not ten.

    >>> from evr1_rewards.sandbox import run_python
    >>> run_python("print(int(input()) * 2)", "21\\n").stdout   # doctest: +SKIP
    '42\\n'
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from evr1_rewards.sandbox.config import SandboxConfig, backend_for, describe
from evr1_rewards.sandbox.types import Backend, Job, RunResult, SandboxLimits, SandboxUnavailableError

__all__ = [
    "Backend",
    "Job",
    "RunResult",
    "SandboxConfig",
    "SandboxLimits",
    "SandboxUnavailableError",
    "backend_for",
    "describe",
    "run_jobs",
    "run_python",
]


def run_jobs(
    jobs: Sequence[Job],
    limits: SandboxLimits | None = None,
    config: SandboxConfig | None = None,
    *,
    answer_seconds: float | None = None,
) -> list[RunResult]:
    """Run `jobs` (e.g. the tests of one answer) in parallel up to the backend's worker limit, results in order.

    `answer_seconds` bounds them all together: a job not started by then is not run (reported as timed out).
    Raises SandboxUnavailableError when no boundary is configured; never raises because of a program.
    """
    limits = limits or SandboxLimits()
    backend = backend_for(config)
    if not jobs:
        return []
    deadline = None if answer_seconds is None else time.monotonic() + answer_seconds
    late = RunResult(None, "", "answer time limit reached before this test started", True, False, 0.0)

    def one(job: Job) -> RunResult:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0.05:
                return late
            if left < limits.wall_seconds:
                return backend.run(job, replace(limits, wall_seconds=left))
        return backend.run(job, limits)

    if len(jobs) == 1:
        return [one(jobs[0])]
    many = getattr(backend, "run_many", None)
    if many is not None and all(j.program == jobs[0].program for j in jobs):
        return list(many(jobs, limits, answer_seconds))
    workers = max(1, min(len(jobs), getattr(backend, "workers", 1)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="evr1-sandbox") as pool:
        return list(pool.map(one, jobs))


def run_python(
    program: str, stdin: str = "", limits: SandboxLimits | None = None, config: SandboxConfig | None = None
) -> RunResult:
    """Run one program on `stdin` behind the configured boundary."""
    return run_jobs([Job(program, stdin)], limits, config)[0]
