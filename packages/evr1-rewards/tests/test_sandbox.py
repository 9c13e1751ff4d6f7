"""Sandbox escape attempts: each must be contained (no effect outside, bounded time) and score 0."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evr1_rewards.sandbox import SandboxLimits, _unshare_prefix, network_isolation, run_python

LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=4, memory_bytes=256 << 20, output_bytes=1 << 20)


def test_normal_program_runs() -> None:
    r = run_python("print(int(input()) * 2)", "21\n", LIMITS)
    assert r.ok
    assert r.stdout == "42\n"


def test_infinite_loop_is_killed_by_cpu_limit() -> None:
    start = time.monotonic()
    r = run_python("while True: pass", "", LIMITS)
    assert not r.ok
    assert time.monotonic() - start < LIMITS.wall_seconds + 2


def test_sleeping_program_hits_the_wall_timeout() -> None:
    r = run_python("import time; time.sleep(60)", "", LIMITS)
    assert r.timed_out
    assert not r.ok
    assert r.wall_seconds < LIMITS.wall_seconds + 2


def test_memory_bomb_is_refused() -> None:
    r = run_python("x = bytearray(4 << 30); print('allocated')", "", LIMITS)
    assert not r.ok
    assert "allocated" not in r.stdout
    assert "MemoryError" in r.stderr


def test_fork_bomb_is_contained() -> None:
    r = run_python("import os\nwhile True:\n    os.fork()\n", "", LIMITS)
    assert not r.ok
    assert "os.fork is not allowed" in r.stderr


@pytest.mark.parametrize(
    "program",
    [
        "import subprocess; subprocess.run(['sh', '-c', 'echo pwned'])",  # subprocess
        "import os; os.system('echo pwned')",  # os.system
        "import os; os.execv('/bin/sh', ['sh', '-c', 'echo pwned'])",  # exec
        "import multiprocessing; multiprocessing.Process(target=print).start()",  # multiprocessing
        "import pty; pty.spawn('/bin/sh')",  # pty
        "import ctypes; ctypes.CDLL(None).system(b'echo pwned')",  # ctypes around the hook
        "import os, signal; os.kill(os.getppid(), signal.SIGKILL)",  # kill the parent
    ],
)
def test_process_escapes_are_refused(program: str) -> None:
    r = run_python(program, "", LIMITS)
    assert not r.ok
    assert "pwned" not in r.stdout


def test_network_access_is_refused() -> None:
    r = run_python(
        "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\ns.connect(('127.0.0.1', 9))\nprint('connected')",
        "",
        LIMITS,
    )
    assert not r.ok
    assert "connected" not in r.stdout
    assert "socket" in r.stderr


def test_network_namespace_has_no_interfaces_when_available() -> None:
    # The namespace layer on its own (without the audit hook): only a loopback device, and it is down.
    prefix = _unshare_prefix()
    if not prefix:
        assert network_isolation() == "audit-hook"
        pytest.skip("this system forbids network namespaces; the audit hook alone refuses sockets (tested above)")
    out = subprocess.run(
        [*prefix, sys.executable, "-c", "import socket; print([n for _, n in socket.if_nameindex()])"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.stdout.strip() == "['lo']"
    probe = subprocess.run(
        [*prefix, sys.executable, "-c", "import socket; socket.create_connection(('127.0.0.1', 9), timeout=2)"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert probe.returncode != 0


def test_writing_outside_the_temp_dir_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "escaped.txt"
    r = run_python(f"open({str(target)!r}, 'w').write('x')", "", LIMITS)
    assert not r.ok
    assert not target.exists()
    r = run_python(f"import os; os.rename('main.py', {str(target)!r})", "", LIMITS)
    assert not r.ok
    assert not target.exists()
    r = run_python("import os; os.symlink('/etc/passwd', 'link'); print(open('link').read())", "", LIMITS)
    assert not r.ok
    assert "root:" not in r.stdout


def test_writing_inside_the_temp_dir_works_but_is_size_limited() -> None:
    r = run_python("open('a.txt', 'w').write('hi'); print(open('a.txt').read())", "", LIMITS)
    assert r.ok
    assert r.stdout == "hi\n"
    r = run_python("open('big', 'w').write('x' * (64 << 20))", "", SandboxLimits(file_bytes=1 << 20, wall_seconds=10))
    assert not r.ok
    assert "File too large" in r.stderr


def test_parent_environment_is_not_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVR1_SECRET_TOKEN", "s3cret")
    r = run_python("import os; print(sorted(os.environ)); print(os.environ.get('EVR1_SECRET_TOKEN'))", "", LIMITS)
    assert r.ok
    assert "s3cret" not in r.stdout
    assert "EVR1_SECRET_TOKEN" not in r.stdout
    r = run_python("import os; print(open(f'/proc/{os.getppid()}/environ').read())", "", LIMITS)
    assert not r.ok
    assert "s3cret" not in r.stdout


def test_reading_host_files_is_refused() -> None:
    # e.g. the training data with the answers
    here = os.path.abspath(__file__)
    r = run_python(f"print(open({here!r}).read()[:20])", "", LIMITS)
    assert not r.ok
    assert "reading" in r.stderr


def test_output_flood_is_capped() -> None:
    r = run_python("while True: print('x' * 10000)", "", LIMITS)
    assert r.output_truncated
    assert not r.ok
    assert len(r.stdout) <= LIMITS.output_bytes


def test_run_tests_isolates_tests_and_reports_each() -> None:
    from evr1_rewards.sandbox import run_tests

    program = (
        "import os\nn = int(input())\n"
        "if n == 1: open('mine.txt', 'w').write('x'); print(sorted(os.listdir('.')))\n"
        "if n == 2: print(sorted(os.listdir('.')))\n"  # test 2 does not see test 1's file
        "if n == 3: print(open('../.io/in0').read())\n"  # nor another test's input
        "if n == 4:\n    while True: pass\n"
        "if n == 5: print('ok')\n"
    )
    r = run_tests(program, ["1", "2", "3", "4", "5"], LIMITS)
    assert r[0].ok
    assert r[0].stdout.strip() == "['mine.txt']"
    assert r[1].ok
    assert r[1].stdout.strip() == "[]"
    assert not r[2].ok
    assert "reading" in r[2].stderr
    assert not r[3].ok  # the runaway test is killed ...
    assert r[4].ok  # ... and the next one still runs
    assert r[4].stdout == "ok\n"
