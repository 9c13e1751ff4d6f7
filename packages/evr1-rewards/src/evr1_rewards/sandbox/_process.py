"""Plumbing shared by the backends: the harness program and its payload, reading a child's output under a wall
deadline and an output cap, and splitting a probe run's values from the program's own output."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Sequence
from contextlib import suppress
from functools import lru_cache
from pathlib import Path

from evr1_rewards.sandbox._harness import MARKER
from evr1_rewards.sandbox.types import Job, RunResult, SandboxLimits
from evr1_rewards.sandbox.watchdog import Watchdog


@lru_cache(maxsize=1)
def harness_source() -> str:
    return (Path(__file__).with_name("_harness.py")).read_text(encoding="utf-8")


def payload(job: Job, limits: SandboxLimits) -> str:
    """The harness's input as a Python literal (it needs no json import to read it)."""
    body: dict[str, object] = {"program": job.program, "limits": limits.as_payload()}
    if job.steps is not None:
        body["steps"] = [list(s) for s in job.steps]
    return repr(body)


def stub_reading_fd(fd: int) -> str:
    """`python -c` source: load the harness, read the payload from `fd`, run."""
    return (
        f"{harness_source()}\n"
        f"import os as _o\n_f = _o.fdopen({fd}, 'rb')\n_p = _f.read().decode('utf-8')\n_f.close()\ndel _o, _f\n"
        "main(_p)\n"
    )


def stub_zygote_reading_fd(fd: int) -> str:
    """`python -c` source for many tests of one program in one sandbox (`_harness.zygote`)."""
    return stub_reading_fd(fd).replace("\nmain(_p)\n", "\nzygote(_p)\n")


def zygote_payload(jobs: Sequence[Job], limits: SandboxLimits, parallel: int) -> str:
    tests = [{"stdin": j.stdin, "steps": None if j.steps is None else [list(s) for s in j.steps]} for j in jobs]
    return repr({"program": jobs[0].program, "limits": limits.as_payload(), "tests": tests,
                 "wall": float(limits.wall_seconds), "parallel": int(parallel), "output_bytes": limits.output_bytes})  # fmt: skip


def split_frames(stdout: bytes, jobs: Sequence[Job], wall: float, err: str) -> list[RunResult]:
    """One RunResult per job from a zygote's frames; a job without a frame did not finish in time."""
    import ast

    frames: dict[int, list[object]] = {}
    tag = ("\n" + MARKER + "frame").encode()
    for chunk in stdout.split(tag)[1:]:
        line = chunk.split(b"\n", 1)[0]
        try:
            frame = ast.literal_eval(line.decode("utf-8", "replace"))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(frame, list) and len(frame) == 6 and isinstance(frame[0], int) and 0 <= frame[0] < len(jobs):
            frames[frame[0]] = frame
    out: list[RunResult] = []
    per = wall / max(1, len(jobs))
    for i, job in enumerate(jobs):
        f = frames.get(i)
        if f is None:
            out.append(RunResult(None, "", f"sandbox: no result for this test ({err[-500:]})", True, False, per))
            continue
        _, rc, timed_out, text, stderr, truncated = f
        own, probes = split_probes(str(text), job)
        out.append(RunResult(rc if isinstance(rc, int) else None, own, str(stderr), bool(timed_out), bool(truncated),
                             per, probes))  # fmt: skip
    return out


def stub_with_payload(text: str) -> str:
    """One self-contained program (for remote services that take only source code and stdin)."""
    return f"{harness_source()}\nmain({text!r})\n"


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with suppress(ProcessLookupError, PermissionError):
            proc.kill()


def collect(
    proc: subprocess.Popen[bytes], limits: SandboxLimits, watchdog: Watchdog | None = None
) -> tuple[bytes, bytes, bool, bool]:
    """(stdout, stderr, timed_out, truncated): read until exit, the wall deadline, the output cap or a budget of the
    `watchdog` (then kill; the watchdog's reason is appended to stderr)."""
    deadline = time.monotonic() + limits.wall_seconds
    assert proc.stdout is not None
    assert proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    bufs = {out_fd: bytearray(), err_fd: bytearray()}
    caps = {out_fd: limits.output_bytes, err_fd: 64 << 10}
    sel = selectors.DefaultSelector()
    for fd in bufs:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    timed_out = truncated = False
    open_streams = 2
    killed: str | None = None
    try:
        while open_streams:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                kill_group(proc)
                break
            if watchdog is not None and (killed := watchdog.check()) is not None:
                kill_group(proc)
                break
            wait = min(remaining, 0.5) if watchdog is None else min(remaining, watchdog.every)
            for key, _ in sel.select(timeout=wait):
                fd = key.fd
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(fd)
                    open_streams -= 1
                    continue
                buf = bufs[fd]
                if len(buf) + len(chunk) > caps[fd]:
                    buf += chunk[: caps[fd] - len(buf)]
                    if fd == out_fd:  # too much output: stop the run; a stderr flood is only cut
                        truncated = True
                        kill_group(proc)
                        open_streams = 0
                        break
                    continue
                buf += chunk
    finally:
        sel.close()
        proc.stdout.close()
        proc.stderr.close()
    err = bytes(bufs[err_fd])
    if killed is not None:
        err += f"\nsandbox: killed: {killed}\n".encode()
    return bytes(bufs[out_fd]), err, timed_out, truncated


def finish(
    proc: subprocess.Popen[bytes], limits: SandboxLimits, watchdog: Watchdog | None = None
) -> tuple[int | None, bytes, bytes, bool, bool]:
    """(returncode, stdout, stderr, timed_out, truncated) of a started run: collect, kill what is left, reap."""
    out, err, timed_out, truncated = collect(proc, limits, watchdog)
    kill_group(proc)
    try:
        rc: int | None = proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        rc = None
    return rc, out, err, timed_out, truncated


def split_probes(stdout: str, job: Job) -> tuple[str, str | None]:
    """(the program's own output, the probe values' JSON text or None) for a run's stdout."""
    if job.steps is None:
        return stdout, None
    pos = stdout.rfind("\n" + MARKER)
    if pos < 0:
        return stdout, None
    return stdout[:pos], stdout[pos + 1 + len(MARKER) :].strip()


def result(
    job: Job, rc: int | None, out: bytes, err: bytes, timed_out: bool, truncated: bool, wall: float
) -> RunResult:
    stdout, probes = split_probes(out.decode("utf-8", "replace"), job)
    return RunResult(rc, stdout, err.decode("utf-8", "replace"), timed_out, truncated, wall, probes)
