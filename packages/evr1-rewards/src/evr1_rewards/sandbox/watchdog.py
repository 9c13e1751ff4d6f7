"""Budgets for a whole sandbox, not per process: memory and CPU summed over every process in its PID namespace.

The harness's rlimits are per process: RLIMIT_AS caps one process's address space and RLIMIT_CPU its CPU time, so
a program that forks up to its process limit (32 by default) could hold 32 x the memory limit of the host's RAM
(32 GiB by default) and keep every core busy, starving the scorer, the trainer and the other sandboxes. cgroups
would bound the sandbox as a whole but need a delegated hierarchy, which a pip-installed scorer cannot assume. So
the parent watches instead: every `every` seconds (after `start_after`, so short runs cost nothing) it reads
`/proc` for the processes in the sandbox's PID namespace — they cannot leave it: no capabilities, no nested user
namespaces — and kills the sandbox when

- their proportional memory (PSS: shared pages split between the processes sharing them, so a fork's copy-on-write
  pages are not counted twice) exceeds `memory_bytes`, or
- their CPU time (live processes plus the reaped children each accounts for) exceeds `cpu_seconds`, or
- they used more than `cores` CPUs on average over the last sampling window of at least 0.5 s (a fork bomb that
  spins; a Python program's threads share one core under the GIL).

Processes are found by uid first (the sandbox's outer uid when the scorer is root, else the scorer's own), then by
PID namespace, so a scan reads a handful of files. What a sample can miss (a process that lives and dies between
two samples) is still bounded by the per-process rlimits and the wall timeout.
"""

from __future__ import annotations

import os
import time
from contextlib import suppress
from dataclasses import dataclass, field

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: str) -> tuple[int, float, int] | None:
    """(ppid, CPU seconds incl. reaped children, rss bytes) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    rest = raw[raw.rfind(b")") + 2 :].split()
    try:
        ppid = int(rest[1])
        cpu = sum(int(x) for x in rest[11:15]) / _TICK  # utime, stime, cutime, cstime
        rss = int(rest[21]) * _PAGE
    except (IndexError, ValueError):
        return None
    return ppid, cpu, rss


def _pss(pid: str, rss: int) -> int:
    with suppress(OSError, ValueError, IndexError), open(f"/proc/{pid}/smaps_rollup", "rb") as f:
        for line in f:
            if line.startswith(b"Pss:"):
                return int(line.split()[1]) * 1024
    return rss


def _ns(pid: str | int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


@dataclass
class Usage:
    processes: int
    memory_bytes: int
    cpu_seconds: float


@dataclass
class Watchdog:
    """Watches the sandbox whose bubblewrap process is `pid` (started as `uid`)."""

    pid: int
    uid: int
    memory_bytes: int
    cpu_seconds: float
    cores: float
    start_after: float = 0.25
    every: float = 0.1
    _ns: str | None = None
    _started: float = field(default_factory=time.monotonic)
    _next: float = 0.0
    _window: tuple[float, float] | None = None  # (time, cpu) at the start of the current rate window

    def __post_init__(self) -> None:
        self._next = self._started + self.start_after
        self._own_ns = _ns("self")

    def usage(self) -> Usage | None:
        """The sandbox's processes now (None until its namespace exists)."""
        try:
            pids = [p for p in os.listdir("/proc") if p.isdigit()]
        except OSError:
            return None
        mine: list[str] = []
        for p in pids:
            try:
                if os.stat(f"/proc/{p}").st_uid != self.uid:
                    continue
            except OSError:
                continue
            mine.append(p)
        if self._ns is None:  # the namespace of bubblewrap's child (its init), once it has its own
            children = (_ns(p) for p in mine if (st := _stat(p)) is not None and st[0] == self.pid)
            self._ns = next((ns for ns in children if ns is not None and ns != self._own_ns), None)
            if self._ns is None:
                return None
        inside = [(p, st) for p in mine if _ns(p) == self._ns and (st := _stat(p)) is not None]
        return Usage(len(inside), sum(_pss(p, st[2]) for p, st in inside), sum((st[1] for _, st in inside), 0.0))

    def check(self) -> str | None:
        """Why the sandbox must be killed now, or None (also when a sample is not due yet)."""
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + self.every
        u = self.usage()
        if u is None:
            return None
        if u.memory_bytes > self.memory_bytes:
            return f"memory budget of the sandbox exceeded: {u.memory_bytes >> 20} MiB in {u.processes} processes"
        if u.cpu_seconds > self.cpu_seconds:
            return f"CPU budget of the sandbox exceeded: {u.cpu_seconds:.1f} s in {u.processes} processes"
        if self._window is None:
            self._window = (now, u.cpu_seconds)
        elif now - self._window[0] >= 0.5:
            rate = (u.cpu_seconds - self._window[1]) / (now - self._window[0])
            self._window = (now, u.cpu_seconds)
            if rate > self.cores:
                return f"the sandbox used {rate:.1f} CPUs at once ({u.processes} processes; at most {self.cores:g})"
        return None
