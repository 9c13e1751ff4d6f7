"""The local boundary: bubblewrap (Debian `bubblewrap`), one fresh sandbox per run.

Each run gets its own user, PID, mount, network, IPC, UTS and cgroup namespaces (`--unshare-all --unshare-user`,
no nested user namespaces: `--disable-userns`), runs as uid/gid 65534 with no capabilities, sees a read-only `/usr`
(plus the interpreter's prefix when it lives elsewhere) and nothing else of the host: a fresh `/proc` showing only
its own processes, a minimal `/dev`, a private size-limited tmpfs as `/tmp` (its working directory), an empty
environment. It starts in a new session and dies with its parent (`--new-session --die-with-parent`): when the
wall timeout kills bwrap, the PID namespace's init dies and the kernel kills everything left in it, `setsid`
daemons included. Resource limits are set by the harness before the program runs and cannot be raised.

Why the outer uid matters: the kernel does not enforce RLIMIT_NPROC for a process whose (outer) uid is root, and a
sandbox started by root maps its uid 65534 to root outside. So when the scorer runs as root, bwrap itself is started
as a dedicated unprivileged uid (`uid_base + slot`, one per concurrent sandbox, no passwd entry needed): the
process limit then holds and sandboxes do not share a process count. Started by a non-root user, bwrap runs as that
user and the limit is counted inside the sandbox's own user namespace.
"""

from __future__ import annotations

import os
import queue
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import lru_cache

from evr1_rewards.sandbox._process import (
    finish,
    payload,
    result,
    split_frames,
    stub_reading_fd,
    stub_zygote_reading_fd,
    zygote_payload,
)
from evr1_rewards.sandbox.types import Job, RunResult, SandboxLimits

SANDBOX_UID = 65534
DEFAULT_UID_BASE = 0x3E000000
"""Outer uids used when the scorer is root: far above any real account (Linux uids are 32-bit)."""
_ROOT_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
       "PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip


def _world_readable(path: str) -> bool:
    """Every directory on the way is traversable and the file readable/executable by 'other' (the sandbox uid)."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
        if not (st.st_mode & stat.S_IROTH and st.st_mode & stat.S_IXOTH):
            return False
        parent = os.path.dirname(real)
        while parent and parent != "/":
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
            parent = os.path.dirname(parent)
    except OSError:
        return False
    return True


@lru_cache(maxsize=4)
def sandbox_python(override: str | None = None) -> tuple[str, str]:
    """(interpreter, prefix to bind read-only) for the sandbox: `override`, else this interpreter's base install
    when the sandbox uid can read it, else the system `python3`."""
    candidates = [override] if override else []
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable) or sys.executable)
    candidates += [base, shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"]
    for exe in candidates:
        if exe and os.path.isfile(exe) and _world_readable(exe):
            real = os.path.realpath(exe)
            prefix = os.path.dirname(os.path.dirname(real))  # <prefix>/bin/python3.x
            return real, prefix
    raise FileNotFoundError("no Python interpreter the sandbox can read (set EVR1_SANDBOX_PYTHON)")


def _root_entries() -> list[str]:
    """bwrap arguments that rebuild /bin, /lib, … as on the host: symlinks stay symlinks, directories are bound."""
    args: list[str] = []
    for path in _ROOT_LINKS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


@dataclass
class BwrapBackend:
    """bubblewrap sandboxes, at most `workers` at a time across all threads of this process."""

    exe: str
    python: str
    prefix: str
    workers: int = 2
    uid_base: int = DEFAULT_UID_BASE
    name: str = "bwrap"

    def __post_init__(self) -> None:
        self._slots: queue.SimpleQueue[int] = queue.SimpleQueue()
        for i in range(max(1, self.workers)):
            self._slots.put(i)
        self._as_root = os.geteuid() == 0
        self._fixed = ["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
                       "--cap-drop", "ALL", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
                       "--hostname", "sandbox", "--ro-bind", "/usr", "/usr", *_root_entries()]  # fmt: skip
        if self.prefix != "/usr" and not self.prefix.startswith("/usr/"):
            self._fixed += ["--ro-bind", self.prefix, self.prefix]
        for k, v in ENV.items():
            self._fixed += ["--setenv", k, v]

    @contextmanager
    def _slot(self) -> Iterator[int]:
        slot = self._slots.get()
        try:
            yield slot
        finally:
            self._slots.put(slot)

    def command(self, limits: SandboxLimits, fd: int, *, zygote: bool = False) -> list[str]:
        stub = stub_zygote_reading_fd(fd) if zygote else stub_reading_fd(fd)
        return [self.exe, *self._fixed, "--proc", "/proc", "--dev", "/dev", "--size", str(int(limits.tmpfs_bytes)),
                "--tmpfs", "/tmp", "--chdir", "/tmp", "--", self.python, "-I", "-S", "-B", "-c", stub]  # fmt: skip

    def _spawn(self, cmd: list[str], stdin: int, pfd: int, slot: int) -> subprocess.Popen[bytes]:
        uid = self.uid_base + slot if self._as_root else None
        return subprocess.Popen(
            cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(pfd,), env={}, cwd="/",
            start_new_session=True, close_fds=True, user=uid, group=uid, extra_groups=[] if uid is not None else None,
        )  # fmt: skip

    def run(self, job: Job, limits: SandboxLimits) -> RunResult:
        data = payload(job, limits).encode()
        with self._slot() as slot, _memfile(data) as pfd, _memfile(job.stdin.encode()) as sfd:
            start = time.monotonic()
            try:
                proc = self._spawn(self.command(limits, pfd), sfd, pfd, slot)
            except OSError as e:
                return RunResult(None, "", "", False, False, 0.0, error=f"bwrap could not start: {e}")
            rc, out, err, timed_out, truncated = finish(proc, limits)
            wall = time.monotonic() - start
        if rc is not None and rc != 0 and err.startswith(b"bwrap:"):
            return RunResult(rc, "", err.decode("utf-8", "replace"), False, False, wall, error=err.decode()[:500])
        return result(job, rc, out, err, timed_out, truncated, wall)

    def run_many(self, jobs: Sequence[Job], limits: SandboxLimits, answer_seconds: float | None) -> list[RunResult]:
        """All tests of one program in one sandbox: a forked child per test (`_harness.zygote`), as many at once as
        worker slots could be taken (at least one). The tests share the sandbox (not each other's folders or
        files' meaning: inputs are no secret and expected outputs never enter it), which saves a sandbox and an
        interpreter start per test."""
        slots = [self._slots.get()]
        try:
            while len(slots) < min(len(jobs), self.workers):
                try:
                    slots.append(self._slots.get_nowait())
                except queue.Empty:
                    break
            parallel = len(slots)
            rounds = -(-len(jobs) // parallel)
            overall = rounds * (limits.wall_seconds + 0.5) + 5.0
            if answer_seconds is not None:
                overall = min(overall, answer_seconds + 1.0)
            cap = len(jobs) * (limits.output_bytes + (96 << 10)) + (1 << 20)
            outer = replace(limits, wall_seconds=overall, output_bytes=cap)
            data = zygote_payload(jobs, limits, parallel).encode()
            with _memfile(data) as pfd, _memfile(b"") as sfd:
                start = time.monotonic()
                try:
                    proc = self._spawn(self.command(limits, pfd, zygote=True), sfd, pfd, slots[0])
                except OSError as e:
                    return [RunResult(None, "", "", False, False, 0.0, error=f"bwrap could not start: {e}")] * len(jobs)
                rc, out, err, _, _ = finish(proc, outer)
                wall = time.monotonic() - start
            text_err = err.decode("utf-8", "replace")
            if rc is not None and rc != 0 and text_err.startswith("bwrap:"):
                return [RunResult(rc, "", text_err, False, False, wall, error=text_err[:500])] * len(jobs)
            return split_frames(out, jobs, wall, text_err)
        finally:
            for s in slots:
                self._slots.put(s)


@contextmanager
def _memfile(data: bytes) -> Iterator[int]:
    """An anonymous file holding `data`, positioned at its start (stdin / payload for the sandbox)."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("evr1-sandbox", 0)
        try:
            _write_all(fd, data)
            os.lseek(fd, 0, os.SEEK_SET)
            yield fd
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.flush()
        f.seek(0)
        yield f.fileno()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


_PROBE_LOCK = threading.Lock()


@lru_cache(maxsize=4)
def probe(exe: str, python: str, prefix: str) -> str | None:
    """None when a trivial program runs in the sandbox with the full argument set here, else the reason it does not."""
    with _PROBE_LOCK:
        backend = BwrapBackend(exe, python, prefix, workers=1)
        r = backend.run(Job("import sys; print(sys.version_info[0])"), SandboxLimits(wall_seconds=30))
        if r.ok and r.stdout.strip() == "3":
            return None
        return (r.error or r.stderr or f"exit code {r.returncode}").strip()[-500:]
