"""Run an untrusted Python program in a subprocess with hard limits. Never trusts the program.

Layers (each independent of the others):
1. A fresh temporary working directory per run, removed afterwards; a clean environment (no parent variables).
2. Kernel resource limits set in the child before the program starts: CPU seconds (RLIMIT_CPU), address space
   (RLIMIT_AS), file size (RLIMIT_FSIZE), process count (RLIMIT_NPROC; not enforced by Linux for root), open files,
   no core dumps.
3. A wall-clock timeout; the child runs in its own session and the whole process group is SIGKILLed afterwards
   (also on success, so nothing it spawned survives). Output is capped.
4. Network: a private, empty network namespace (`unshare --net`, or `--map-root-user --net` when unprivileged) when
   the system allows it - `network_isolation()` says which is in force - and, always, an audit hook in the child.
5. The audit hook (PEP 578), installed before the program runs, refuses: socket creation, fork/exec/spawn/subprocess,
   kill, ctypes, gc object walking, rlimit changes, writes outside the working directory, and reads outside the
   working directory and the interpreter's own library paths (so neither the dataset nor /proc/<parent>/environ can
   be read). Audit hooks are not a security boundary on their own; layers 1-4 are what contain a determined program.
   For hostile multi-tenant settings run the reward workers inside a container as well.
"""

from __future__ import annotations

import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_sandbox_child.py")
_CHILD_NAME = "__evr1_sandbox_child__"
_STUB = (
    "from importlib.machinery import SourceFileLoader as L\n"
    f"exec(L({_CHILD_NAME!r}, {_CHILD!r}).get_code({_CHILD_NAME!r}), "
    f"{{'__name__': {_CHILD_NAME!r}, '__builtins__': __builtins__}})\n"
)


@lru_cache(maxsize=1)
def _child_bytecode() -> None:
    """Write the child's bytecode cache once (uv installs without .pyc files); the child runs with -B."""
    from importlib.machinery import SourceFileLoader

    try:
        SourceFileLoader(_CHILD_NAME, _CHILD).get_code(_CHILD_NAME)
    except (OSError, SyntaxError):
        pass


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Per-run limits. Defaults suit competitive-programming style tests."""

    cpu_seconds: int = 5
    wall_seconds: float = 10.0
    memory_bytes: int = 1 << 30
    file_bytes: int = 16 << 20
    processes: int = 64
    output_bytes: int = 4 << 20


@dataclass(frozen=True, slots=True)
class RunResult:
    """What happened to one run."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    output_truncated: bool
    wall_seconds: float
    completed: bool | None = None
    """For runs with test code after the program: whether that code ran to its end (None: no such code)."""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.output_truncated and self.completed is not False


@lru_cache(maxsize=1)
def _unshare_prefix() -> tuple[str, ...]:
    """The command prefix that gives the child a private network namespace, or () where the system forbids it."""
    exe = shutil.which("unshare")
    if exe is None or not sys.platform.startswith("linux"):
        return ()
    for prefix in ((exe, "--net", "--"), (exe, "--map-root-user", "--net", "--")):
        try:
            r = subprocess.run([*prefix, "true"], capture_output=True, timeout=10, env={"PATH": "/usr/bin:/bin"})
        except (OSError, subprocess.SubprocessError):
            continue
        if r.returncode == 0:
            return prefix
    return ()


def network_isolation() -> str:
    """'netns+audit-hook' when runs get a private network namespace, else 'audit-hook' (socket creation refused)."""
    return "netns+audit-hook" if _unshare_prefix() else "audit-hook"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _args(limits: SandboxLimits, root: str, prog: str) -> list[str]:
    return [
        str(max(1, int(limits.cpu_seconds))),
        str(int(limits.memory_bytes)),
        str(int(limits.file_bytes)),
        str(int(limits.processes)),
        root,
        prog,
    ]


def _env(root: str) -> dict[str, str]:
    """A clean environment: nothing of the parent's (tokens, paths) reaches the program."""
    return {"PATH": "/usr/bin:/bin", "HOME": root, "TMPDIR": root, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
            "PYTHONIOENCODING": "utf-8"}  # fmt: skip


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8", errors="replace") as f:
        f.write(text)


def run_python(program: str, stdin: str = "", limits: SandboxLimits | None = None) -> RunResult:
    """Run `program` (Python source) on `stdin` under `limits`. Never raises because of the program."""
    limits = limits or SandboxLimits()
    with tempfile.TemporaryDirectory(prefix="evr1-sbx-") as tmp:
        prog = os.path.join(tmp, "main.py")
        _write(prog, program)
        in_path = os.path.join(tmp, ".stdin")
        _write(in_path, stdin)
        _child_bytecode()
        cmd = [*_unshare_prefix(), sys.executable, "-I", "-S", "-B", "-c", _STUB, *_args(limits, tmp, prog)]
        start = time.monotonic()
        with open(in_path, "rb") as fin:
            try:
                proc = subprocess.Popen(
                    cmd, stdin=fin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp, env=_env(tmp),
                    start_new_session=True, close_fds=True,
                )  # fmt: skip
            except OSError as e:
                return RunResult(None, "", f"sandbox: could not start: {e}", False, False, 0.0)
        out, err, timed_out, truncated = _collect(proc, limits)
        _kill_group(proc)
        try:
            rc = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            rc = None
        wall = time.monotonic() - start
    return RunResult(rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), timed_out, truncated, wall)


def _read_capped(path: str, cap: int) -> tuple[str, bool]:
    try:
        with open(path, "rb") as f:
            data = f.read(cap + 1)
    except OSError:
        return "", False
    return data[:cap].decode("utf-8", "replace"), len(data) > cap


def run_tests(
    program: str,
    stdins: Sequence[str],
    limits: SandboxLimits | None = None,
    suffixes: Sequence[str | None] | None = None,
) -> list[RunResult]:
    """Run `program` once per stdin, each in a fresh forked child with its own working directory and the same
    limits and hook as `run_python`, paying the interpreter start-up once. Never raises because of the program.

    `suffixes[i]`: test code run after the program in its namespace (asserts); `completed` then says whether it ran
    to its end - proven by a nonce the program cannot read, so exiting early never passes a test.
    """
    limits = limits or SandboxLimits()
    if not stdins:
        return []
    suffixes = list(suffixes) if suffixes is not None else [None] * len(stdins)
    if len(suffixes) != len(stdins):
        raise ValueError("run_tests: suffixes and stdins differ in length")
    nonces = [secrets.token_hex(16).encode() if sfx is not None else None for sfx in suffixes]
    with tempfile.TemporaryDirectory(prefix="evr1-sbx-") as tmp:
        prog = os.path.join(tmp, "main.py")
        _write(prog, program)
        io = os.path.join(tmp, ".io")
        os.mkdir(io)
        for i, text in enumerate(stdins):
            _write(os.path.join(io, f"in{i}"), text)
            os.mkdir(os.path.join(tmp, f"t{i}"))
            if suffixes[i] is not None:
                _write(os.path.join(io, f"suffix{i}"), suffixes[i])  # type: ignore[arg-type]
                with open(os.path.join(io, f"nonce{i}"), "wb") as f:
                    f.write(nonces[i])  # type: ignore[arg-type]
        _child_bytecode()
        args = [*_args(limits, tmp, prog), str(limits.wall_seconds), str(len(stdins))]
        cmd = [*_unshare_prefix(), sys.executable, "-I", "-S", "-B", "-c", _STUB, "zygote", *args]
        overall = SandboxLimits(wall_seconds=len(stdins) * (limits.wall_seconds + 1.0) + 10.0, output_bytes=1 << 20)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp,
                env=_env(tmp), start_new_session=True, close_fds=True,
            )  # fmt: skip
        except OSError as e:
            return [RunResult(None, "", f"sandbox: could not start: {e}", False, False, 0.0)] * len(stdins)
        status, zerr, _, _ = _collect(proc, overall)
        _kill_group(proc)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        wall = time.monotonic() - start
        reported: dict[int, tuple[int, bool]] = {}
        for line in status.decode("ascii", "replace").splitlines():
            parts = line.split()
            if len(parts) == 3 and all(p.lstrip("-").isdigit() for p in parts):
                reported[int(parts[0])] = (int(parts[1]), parts[2] == "1")
        results = []
        for i in range(len(stdins)):
            if i not in reported:
                reason = zerr.decode("utf-8", "replace")[-2000:] or "the sandbox stopped before this test"
                results.append(RunResult(None, "", f"sandbox: {reason}", True, False, wall))
                continue
            rc, timed_out = reported[i]
            out, out_cut = _read_capped(os.path.join(io, f"out{i}"), limits.output_bytes)
            err, _ = _read_capped(os.path.join(io, f"err{i}"), 64 << 10)
            completed = None
            if nonces[i] is not None:
                try:
                    with open(os.path.join(io, f"done{i}"), "rb") as f:
                        completed = f.read(64) == nonces[i]
                except OSError:
                    completed = False
            results.append(RunResult(rc, out, err, timed_out, out_cut, wall / len(stdins), completed))
    return results


def _collect(proc: subprocess.Popen[bytes], limits: SandboxLimits) -> tuple[bytes, bytes, bool, bool]:
    """Read stdout/stderr until exit, the wall deadline, or the output cap (then kill the group)."""
    deadline = time.monotonic() + limits.wall_seconds
    bufs: dict[int, bytearray] = {}
    sel = selectors.DefaultSelector()
    for stream in (proc.stdout, proc.stderr):
        assert stream is not None
        os.set_blocking(stream.fileno(), False)
        sel.register(stream, selectors.EVENT_READ)
        bufs[stream.fileno()] = bytearray()
    timed_out = truncated = False
    open_streams = 2
    try:
        while open_streams:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                _kill_group(proc)
                break
            for key, _ in sel.select(timeout=min(remaining, 0.5)):
                try:
                    chunk = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(key.fileobj)
                    open_streams -= 1
                    continue
                buf = bufs[key.fd]
                buf += chunk
                if len(buf) > limits.output_bytes:
                    del buf[limits.output_bytes :]
                    truncated = True
                    _kill_group(proc)
                    open_streams = 0
                    break
    finally:
        sel.close()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert proc.stdout is not None
    assert proc.stderr is not None
    return bytes(bufs[next(iter(bufs))]), bytes(list(bufs.values())[1]), timed_out, truncated
