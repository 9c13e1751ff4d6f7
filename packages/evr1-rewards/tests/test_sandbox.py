"""The sandbox boundary itself (bubblewrap): what a program inside sees and can do, limits, timeouts, selection.

The scripted attack suite (each escape and cheat scored through the `code` reward) is `test_code_attacks.py`."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from evr1_rewards import RewardRouter, score
from evr1_rewards.sandbox import (
    Job,
    SandboxConfig,
    SandboxLimits,
    SandboxUnavailableError,
    backend_for,
    run_jobs,
    run_python,
)
from evr1_rewards.sandbox import config as sandbox_config

LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=4, memory_bytes=256 << 20, output_bytes=1 << 20)


def test_the_default_boundary_here_is_bubblewrap() -> None:
    # CI installs bubblewrap (.ci/run); without it the code type refuses to run (tested below), never falls back.
    assert backend_for().name == "bwrap"


def test_normal_program_runs() -> None:
    r = run_python("print(int(input()) * 2)", "21\n", LIMITS)
    assert r.ok, r
    assert r.stdout == "42\n"


def test_the_sandbox_sees_nothing_of_the_host() -> None:
    program = (
        "import os, sys\n"
        "print(os.getuid(), os.getgid())\n"
        "print(sorted(os.listdir('/')))\n"
        "print(sorted(p for p in os.listdir('/proc') if p.isdigit()))\n"
        "print(sorted(os.environ))\n"
        "print(os.getcwd(), os.listdir('.'))\n"
        "print(open('/proc/self/uid_map').read().split()[:1])\n"
    )
    r = run_python(program, "", LIMITS)
    assert r.ok, r
    uid, root, pids, env, cwd, uid_map = r.stdout.splitlines()
    assert uid == "65534 65534"
    assert set(eval(root)) <= {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "proc", "dev", "tmp"}
    assert len(eval(pids)) <= 3  # its own PID namespace: bwrap's init, the interpreter
    assert "HOME" in env
    assert "EVR1" not in env
    assert "PYTEST" not in env
    assert cwd == "/tmp []"
    assert uid_map == "['65534']"


def test_infinite_loop_is_killed_by_the_cpu_limit() -> None:
    start = time.monotonic()
    r = run_python("while True: pass", "", LIMITS)
    assert not r.ok
    assert time.monotonic() - start < LIMITS.wall_seconds + 3


def test_sleeping_program_hits_the_wall_timeout() -> None:
    r = run_python("import time; time.sleep(60)", "", LIMITS)
    assert r.timed_out
    assert not r.ok


def test_memory_bomb_is_refused() -> None:
    r = run_python("x = bytearray(4 << 30); print('allocated')", "", LIMITS)
    assert not r.ok
    assert "allocated" not in r.stdout
    assert "MemoryError" in r.stderr


def test_private_tmp_is_size_limited_and_files_are_capped() -> None:
    r = run_python("open('a.txt', 'w').write('hi'); print(open('a.txt').read())", "", LIMITS)
    assert r.ok
    assert r.stdout == "hi\n"
    r = run_python("open('big', 'wb').write(b'x' * (8 << 20))", "", SandboxLimits(file_bytes=1 << 20))
    assert not r.ok
    assert "File too large" in r.stderr or "Errno 27" in r.stderr
    r = run_python("open('big', 'wb').write(b'x' * (8 << 20))", "", SandboxLimits(tmpfs_bytes=1 << 20))
    assert not r.ok
    assert "No space left" in r.stderr


def test_output_flood_is_capped() -> None:
    r = run_python("while True: print('x' * 10000)", "", LIMITS)
    assert r.output_truncated
    assert not r.ok
    assert len(r.stdout) <= LIMITS.output_bytes


def test_tests_of_one_answer_run_in_parallel_under_one_deadline() -> None:
    # ten tests that each sleep: bounded by the answer's deadline, not ten timeouts in a row
    jobs = [Job("import time; time.sleep(30)")] * 10
    start = time.monotonic()
    results = run_jobs(jobs, SandboxLimits(wall_seconds=2), answer_seconds=4)
    elapsed = time.monotonic() - start
    assert all(not r.ok for r in results)
    assert elapsed < 10, elapsed  # 10 x 2 s in a row would be 20 s


def test_every_test_gets_a_fresh_sandbox() -> None:
    program = (
        "import os\nn = int(input())\nif n == 1: open('mine.txt', 'w').write('x')\nprint(sorted(os.listdir('.')))\n"
    )
    r1, r2 = run_jobs([Job(program, "1"), Job(program, "2")], LIMITS)
    assert r1.stdout.strip() == "['mine.txt']"
    assert r2.stdout.strip() == "[]"  # test 2 never sees test 1's files


def test_without_a_boundary_code_is_refused_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    monkeypatch.setattr(sandbox_config, "_BACKENDS", {})
    monkeypatch.delenv("EVR1_SANDBOX_FUSION_URL", raising=False)
    with pytest.raises(SandboxUnavailableError, match=r"apt-get install bubblewrap.*SandboxFusion.*unsafe_local"):
        score("<answer>print(1)</answer>", '[{"input": "", "output": "1"}]', "code")
    from evr1_rewards import RewardInput

    with pytest.raises(SandboxUnavailableError):  # on_error="zero" does not hide a missing boundary either
        RewardRouter(on_error="zero").score(
            RewardInput(response="<answer>print(1)</answer>", ground_truth='[{"input": "", "output": "1"}]',
                        problem_type="code")
        )  # fmt: skip


def test_unsafe_local_is_an_explicit_opt_in_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sandbox_config, "_BACKENDS", {})
    monkeypatch.setattr(sandbox_config, "_WARNED", set())
    router = RewardRouter(sandbox=SandboxConfig(unsafe_local=True))
    from evr1_rewards import RewardInput

    with caplog.at_level("WARNING"):
        res = router.score(
            RewardInput(response="<answer>print(int(input()) + 1)</answer>", ground_truth='[{"input": "1", "output": "2"}]',
                        problem_type="code")
        )  # fmt: skip
    assert res.accuracy == 1.0
    assert "WITHOUT a sandbox boundary" in caplog.text


def test_environment_selects_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVR1_SANDBOX", "sandbox_fusion")
    monkeypatch.setenv("EVR1_SANDBOX_FUSION_URL", "http://127.0.0.1:9/")
    cfg = sandbox_config.effective(None)
    assert (cfg.backend, cfg.url) == ("sandbox_fusion", "http://127.0.0.1:9/")
    assert backend_for().name == "sandbox_fusion"
    monkeypatch.setenv("EVR1_SANDBOX", "nonsense")
    with pytest.raises(Exception, match="EVR1_SANDBOX must be one of"):
        sandbox_config.effective(None)


def test_process_limit_holds_for_the_sandbox_uid_when_the_scorer_is_root() -> None:
    # RLIMIT_NPROC is not enforced for a process whose outer uid is root: bwrap is started as a dedicated uid.
    program = (
        "import os, time\nn = 0\ntry:\n    for _ in range(200):\n        if os.fork() == 0:\n"
        "            time.sleep(5); os._exit(0)\n        n += 1\nexcept OSError:\n    pass\nprint(n)\n"
    )
    r = run_python(program, "", SandboxLimits(processes=16, wall_seconds=8))
    assert r.ok, r
    assert int(r.stdout) < 16, (os.geteuid(), r.stdout)


# -- budgets of the whole sandbox (sandbox.watchdog): rlimits are per process, a program may fork --------------------

BUDGET = SandboxLimits(cpu_seconds=5, wall_seconds=60, memory_bytes=160 << 20)
FORKED_MEMORY = (  # 8 processes, each under the 160 MiB limit: 800 MiB in all
    "import os, time\nkids = []\nfor _ in range(8):\n    pid = os.fork()\n    if pid == 0:\n"
    "        b = bytearray(100 << 20)\n        for i in range(0, len(b), 4096):\n            b[i] = 1\n"
    "        time.sleep(3)\n        os._exit(0)\n    kids.append(pid)\nfor k in kids:\n    os.waitpid(k, 0)\nprint('ok')\n"
)
FORKED_CPU = (  # 8 processes spinning 0.9 s of CPU each, each under the 1 s CPU limit: 7 s of CPU in all
    "import os, time\nkids = []\nfor _ in range(8):\n    pid = os.fork()\n    if pid == 0:\n"
    "        t = time.process_time()\n        while time.process_time() - t < 0.9:\n            pass\n        os._exit(0)\n"
    "    kids.append(pid)\nfor k in kids:\n    os.waitpid(k, 0)\nprint('ok')\n"
)
ONE_PROCESS_100MB = "b = bytearray(100 << 20)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\nprint('ok')\n"


def test_memory_spread_over_forked_processes_is_bounded_for_the_whole_sandbox() -> None:
    r = run_python(FORKED_MEMORY, "", BUDGET)
    assert "ok" not in r.stdout
    assert "memory budget of the sandbox exceeded" in r.stderr, r.stderr[-500:]
    # the tests of one answer share one budget (their number x the limit): a fork bomb in one of them is stopped too
    attacker, _ = run_jobs([Job(FORKED_MEMORY), Job(ONE_PROCESS_100MB)], BUDGET)
    assert "ok" not in attacker.stdout


def test_cpu_spread_over_forked_processes_is_bounded_for_the_whole_sandbox() -> None:
    r = run_python(FORKED_CPU, "", SandboxLimits(cpu_seconds=1, wall_seconds=60))
    assert "ok" not in r.stdout
    killed = r.stderr[r.stderr.find("sandbox: killed:") :]
    assert killed.startswith("sandbox: killed:"), r.stderr[-500:]
    assert "CPU" in killed
    assert not r.timed_out  # stopped by its budget long before the wall timeout


def test_honest_programs_fit_the_whole_sandbox_budget() -> None:
    r = run_python(ONE_PROCESS_100MB, "", BUDGET)
    assert r.ok, r
    results = run_jobs([Job(ONE_PROCESS_100MB)] * 4, BUDGET)
    assert [x.stdout for x in results] == ["ok\n"] * 4, [x.stderr[-300:] for x in results]
    pool = (  # the program's functions pickle by name from __main__, and two busy processes fit the CPU budget
        "from multiprocessing import Pool\ndef f(n):\n    return sum(i * i for i in range(n))\n"
        "if __name__ == '__main__':\n    with Pool(2) as p:\n        print(sum(p.map(f, [400_000] * 4)))\n"
    )
    r = run_python(pool, "", BUDGET)
    assert r.stdout == f"{4 * sum(i * i for i in range(400_000))}\n", r.stderr[-500:]


def test_only_the_size_limited_tmpfs_mounts_are_writable() -> None:
    """bubblewrap's root and /dev are tmpfs sized at half the host's RAM and charged to no process: writable, they
    let a program park gigabytes of host memory in files (16 MiB each under RLIMIT_FSIZE). Now only /tmp and
    /dev/shm are writable, each at most `tmpfs_bytes`; `multiprocessing` (which needs /dev/shm) still works."""
    program = (
        "import os\nfor d in ('/', '/dev', '/dev/shm', '/tmp'):\n    n = 0\n    try:\n        while n < 160:\n"
        "            with open(f'{d.rstrip(\"/\")}/f{n}', 'wb') as f:\n                f.write(b'x' * (4 << 20))\n"
        "            n += 4\n    except OSError:\n        pass\n    print(d, n)\n"
        "    for k in range(0, n, 4):\n        os.unlink(f'{d.rstrip(\"/\")}/f{k}')\n"
        "import multiprocessing as mp\nq = mp.Queue(); q.put(7); lock = mp.Lock()\nwith lock:\n    print('mp', q.get())\n"
    )
    r = run_python(program, "", SandboxLimits(tmpfs_bytes=32 << 20, file_bytes=8 << 20, wall_seconds=30))
    assert r.ok, r
    written = dict(line.split() for line in r.stdout.splitlines())
    assert written["/"] == written["/dev"] == "0"
    assert int(written["/dev/shm"]) <= 32
    assert int(written["/tmp"]) <= 32
    assert written["mp"] == "7"
