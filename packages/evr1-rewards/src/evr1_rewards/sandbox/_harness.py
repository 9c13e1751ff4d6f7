"""The harness: the trusted code that runs *inside* the sandbox, before the untrusted program, in the same interpreter.

It is not a security layer (the kernel boundary around the interpreter is); it only sets the resource limits, runs
the program as `__main__`, and for assert / call-based tests evaluates the test's *probe* expressions (the parts of
a test that need the program, e.g. `add(1, 2)`) and prints their values as tagged JSON after a marker line. The
parent decodes those values and does every comparison itself, so expected outputs never enter the sandbox and a
program that tampers with this harness (it runs in the same interpreter and can) can at most lie about its own
values — which it could do honestly anyway.

Sent to the interpreter as source (`python -I -S -B -c`); the module only defines functions (importing it runs
nothing), and imports nothing a bare interpreter has not loaded already except `resource` (no `json`: its import
and regex compilation would double the start-up cost of every test). Payload: a Python literal (written by the
parent) of `program`, `limits`, and for probe runs `steps`: a list of `["exec", source]` (test set-up statements,
run in the program's namespace) and `["probe", [expr, ...]]`. Probe values go back as the `repr` of their tagged
form, which the parent reads with `ast.literal_eval`.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers read this name as True
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import CodeType

    from evr1_rewards.sandbox.types import Step

MARKER = "@@evr1-probe-results@@"


def encode(value: object, depth: int = 0) -> object:
    """Built-in values in a tagged form made of lists, dicts, str, int, float, bool and None; anything else (a
    subclass included) is {"X": type name}: never equal."""
    t = type(value)
    if value is None or t is bool or t is str:
        return value
    # (`t is T and isinstance(...)`: exact built-in types only, a subclass is {"X": ...}; the isinstance narrows)
    if t is int and isinstance(value, int):
        return value if -(1 << 53) < value < (1 << 53) else {"I": str(value)}
    if t is float:
        return value if value == value and value not in (float("inf"), float("-inf")) else {"F": repr(value)}
    if depth > 64:
        return {"X": "too deep"}
    tags: dict[type, str] = {list: "L", tuple: "T", set: "S", frozenset: "FS"}
    if t in tags and isinstance(value, (list, tuple, set, frozenset)):
        return {tags[t]: [encode(v, depth + 1) for v in value]}
    if t is dict and isinstance(value, dict):
        return {"D": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if t is complex and isinstance(value, complex):
        return {"C": [repr(value.real), repr(value.imag)]}
    if t is bytes and isinstance(value, bytes):
        return {"B": value.hex()}
    return {"X": t.__name__}


def _limit(name: str, soft: int, hard: int) -> None:
    import resource  # imported by the first call; a lookup in sys.modules after that

    try:
        resource.setrlimit(getattr(resource, name), (soft, hard))
    except (ValueError, OSError, AttributeError):
        pass  # a limit the platform does not support: the others (and the kernel boundary) still apply


def _set_limits(lim: dict, cpu: bool = True) -> None:
    if cpu:
        n = int(lim["cpu_seconds"])
        _limit("RLIMIT_CPU", n, n + 1)
    _limit("RLIMIT_AS", int(lim["memory_bytes"]), int(lim["memory_bytes"]))
    _limit("RLIMIT_FSIZE", int(lim["file_bytes"]), int(lim["file_bytes"]))
    _limit("RLIMIT_NOFILE", int(lim["open_files"]), int(lim["open_files"]))
    _limit("RLIMIT_NPROC", int(lim["processes"]), int(lim["processes"]))
    _limit("RLIMIT_CORE", 0, 0)


def run_one(code: "CodeType", steps: "Sequence[Step] | None") -> None:
    """Run the compiled program as __main__, then the test steps (if any); never returns (os._exit)."""
    import builtins
    import os
    import sys

    write, flush, exit_now = os.write, sys.stdout.flush, os._exit
    builtin_dict = vars(builtins)
    saved = dict(builtin_dict)
    # A real module registered as __main__ (this process is the test's own fork): pickle finds the program's
    # functions there, so `multiprocessing.Pool(...).map(f, ...)` works as in `python main.py`.
    main = type(sys)("__main__")
    sys.modules["__main__"] = main
    namespace = vars(main)
    namespace.update({"__file__": "main.py", "__builtins__": builtins})
    sys.argv = ["main.py"]
    rc = 0
    try:
        exec(code, namespace)
    except SystemExit as e:
        if steps is not None:
            exit_now(3)  # leaving before the tests passes none of them
        rc = 0 if e.code is None else e.code if type(e.code) is int else 1
        if type(e.code) is str:
            sys.stderr.write(e.code + "\n")
    except BaseException:
        sys.excepthook(*sys.exc_info())  # the C implementation: no `traceback` import
        rc = 1
    if steps is None:
        try:
            flush()
            sys.stderr.flush()
        finally:
            exit_now(rc & 0xFF)
    if rc:
        exit_now(rc)
    # Probe run: the program's definitions are in `namespace`. Built-ins are restored first, so a program that
    # rebinds `len` or `sorted` does not change what a test's own set-up code computes.
    builtin_dict.clear()
    builtin_dict.update(saved)
    namespace["__builtins__"] = builtins
    results: list[object] = []
    for kind, body in steps:
        if kind == "exec":
            try:
                if not isinstance(body, str):  # what `compile` raises on a list: the set-up fails the same way
                    raise TypeError("an exec step is source text")
                exec(compile(body, "test.py", "exec"), namespace)
            except BaseException as e:  # the set-up failed: every later probe fails
                results.append({"E": type(e).__name__})
                break
            continue
        values: list[object] = []
        for expr in body:
            try:
                values.append(encode(eval(compile(expr, "test.py", "eval"), namespace)))
            except BaseException as e:
                values.append({"E": type(e).__name__})
        results.append(values)
    try:
        flush()
    except BaseException:
        pass
    write(1, ("\n" + MARKER + repr(results) + "\n").encode())
    exit_now(0)


def _compile(source: str) -> "CodeType":
    import os
    import sys

    try:
        return compile(source, "main.py", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
        sys.stderr.write(f"the program does not compile: {e!r}\n")
        os._exit(1)


def main(payload_text: str) -> None:
    """One run: the payload's program on this process's stdin/stdout."""
    payload = eval(compile(payload_text, "<payload>", "eval"), {"__builtins__": {}})  # a literal from the parent
    _set_limits(payload["limits"])
    code = _compile(payload["program"])
    steps = payload.get("steps")
    del payload
    run_one(code, steps)


def zygote(payload_text: str) -> None:
    """Many runs of one program in this sandbox: a forked child per test (no interpreter start per test), up to
    `parallel` at a time, each in its own empty folder /tmp/t<i> with its stdin/stdout/stderr in /tmp/.io, in its own
    process group (killed at its wall deadline), with its own CPU limit. Prints one frame per test:
    MARKER + repr([i, returncode, timed_out, stdout, stderr tail, truncated]). The zygote never runs program code."""
    import os
    import sys
    import time

    payload = eval(compile(payload_text, "<payload>", "eval"), {"__builtins__": {}})
    lim, tests, wall, parallel = payload["limits"], payload["tests"], float(payload["wall"]), int(payload["parallel"])
    out_cap = int(payload["output_bytes"])
    _set_limits(lim, cpu=False)
    code = _compile(payload["program"])
    del payload
    os.mkdir("/tmp/.io", 0o700)
    for i, t in enumerate(tests):
        os.mkdir(f"/tmp/t{i}")
        with open(f"/tmp/.io/{i}.in", "w", encoding="utf-8", errors="replace") as fin:
            fin.write(t["stdin"])
    running: dict[int, tuple[int, float]] = {}  # pid -> (test index, deadline)
    pending = list(range(len(tests)))
    status: dict[int, tuple[int, bool]] = {}

    def start(i: int) -> None:
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            try:
                os.setpgid(0, 0)
                os.chdir(f"/tmp/t{i}")
                for fd, name, flags in ((0, "in", os.O_RDONLY), (1, "out", os.O_WRONLY | os.O_CREAT),
                                        (2, "err", os.O_WRONLY | os.O_CREAT)):  # fmt: skip
                    new = os.open(f"/tmp/.io/{i}.{name}", flags, 0o600)
                    os.dup2(new, fd)
                    os.close(new)
                os.closerange(3, 1 << 16)
                _set_limits(lim)
                run_one(code, tests[i].get("steps"))
            finally:
                os._exit(1)
        running[pid] = (i, time.monotonic() + wall)

    delay = 0.0005
    while pending or running:
        while pending and len(running) < parallel:
            start(pending.pop(0))
        done = False
        for pid, (i, deadline) in list(running.items()):
            got, st = os.waitpid(pid, os.WNOHANG)
            if got:
                status[i] = (os.waitstatus_to_exitcode(st), False)
            elif time.monotonic() > deadline:
                try:
                    os.killpg(pid, 9)
                except OSError:
                    pass
                os.waitpid(pid, 0)
                status[i] = (-9, True)
            else:
                continue
            try:
                os.killpg(pid, 9)  # whatever the test left running in its group
            except OSError:
                pass
            del running[pid]
            done = True
        if done:
            delay = 0.0005
        else:
            time.sleep(delay)
            delay = min(delay * 2, 0.005)
    for i in range(len(tests)):
        rc, timed_out = status[i]
        out = err = b""
        try:
            with open(f"/tmp/.io/{i}.out", "rb") as fo:
                out = fo.read(out_cap + 1)
            with open(f"/tmp/.io/{i}.err", "rb") as fe:
                err = fe.read(1 << 16)
        except OSError:
            pass  # the test deleted them: it reports nothing
        frame = [i, rc, timed_out, out[:out_cap].decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                 len(out) > out_cap]  # fmt: skip
        os.write(1, ("\n" + MARKER + "frame" + repr(frame) + "\n").encode())
    os._exit(0)
