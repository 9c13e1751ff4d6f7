"""`unsafe_local`: the program in a plain child process, for trusted data only (no kernel boundary).

What it still does: a fresh temporary working directory, an empty environment, `python -I -S -B`, the harness's
resource limits, its own session killed as a group after the run, a wall timeout and an output cap. What it does
not do: hide the host's files, processes, network or the scorer's `/proc` (see `evr1_rewards.sandbox.bwrap`).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from evr1_rewards.sandbox._process import finish, payload, result, stub_reading_fd
from evr1_rewards.sandbox.bwrap import ENV, _memfile
from evr1_rewards.sandbox.types import Job, RunResult, SandboxLimits


@dataclass
class UnsafeLocalBackend:
    """No boundary: a child interpreter with limits. Chosen only by an explicit `unsafe_local=True`."""

    python: str = sys.executable
    name: str = "unsafe_local"

    def run(self, job: Job, limits: SandboxLimits) -> RunResult:
        with (
            tempfile.TemporaryDirectory(prefix="evr1-unsafe-") as tmp,
            _memfile(payload(job, limits).encode()) as pfd,
            _memfile(job.stdin.encode()) as sfd,
        ):
            env = {**ENV, "HOME": tmp, "TMPDIR": tmp}
            start = time.monotonic()
            try:
                proc = subprocess.Popen(
                    [self.python, "-I", "-S", "-B", "-c", stub_reading_fd(pfd)], stdin=sfd, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, pass_fds=(pfd,), env=env, cwd=tmp, start_new_session=True,
                )  # fmt: skip
            except OSError as e:
                return RunResult(None, "", "", False, False, 0.0, error=f"could not start {self.python}: {e}")
            rc, out, err, timed_out, truncated = finish(proc, limits)
        return result(job, rc, out, err, timed_out, truncated, time.monotonic() - start)
