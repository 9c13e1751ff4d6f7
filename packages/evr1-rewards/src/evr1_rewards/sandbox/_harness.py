"""The harness: the trusted code that runs *inside* the sandbox, before the untrusted program, in the same interpreter.

It is not a security layer (the kernel boundary around the interpreter is); it only sets the resource limits, runs
the program as `__main__`, and for assert / call-based tests evaluates the test's *probe* expressions (the parts of
a test that need the program, e.g. `add(1, 2)`) and prints their values as tagged JSON after a marker line. The
parent decodes those values and does every comparison itself, so expected outputs never enter the sandbox and a
program that tampers with this harness (it runs in the same interpreter and can) can at most lie about its own
values — which it could do honestly anyway.

Sent to the interpreter as source (`python -I -S -B -c`); the module only defines functions (importing it runs
nothing), and uses only modules every CPython has. Payload (JSON): `program`, `limits`, and for probe runs `steps`:
a list of `["exec", source]` (test set-up statements, run in the program's namespace) and `["probe", [expr, ...]]`.
"""

MARKER = "@@evr1-probe-results@@"


def encode(value: object, depth: int = 0) -> object:
    """Built-in values as tagged JSON; anything else (a subclass included) is {"X": type name}: never equal."""
    t = type(value)
    if value is None or t is bool or t is str:
        return value
    if t is int:
        return value if -(1 << 53) < value < (1 << 53) else {"I": str(value)}  # type: ignore[operator]
    if t is float:
        return value if value == value and value not in (float("inf"), float("-inf")) else {"F": repr(value)}
    if depth > 64:
        return {"X": "too deep"}
    tags: dict[type, str] = {list: "L", tuple: "T", set: "S", frozenset: "FS"}
    if t in tags:
        return {tags[t]: [encode(v, depth + 1) for v in value]}  # type: ignore[attr-defined]
    if t is dict:
        return {"D": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}  # type: ignore[attr-defined]
    if t is complex:
        return {"C": [repr(value.real), repr(value.imag)]}  # type: ignore[attr-defined]
    if t is bytes:
        return {"B": value.hex()}  # type: ignore[attr-defined]
    return {"X": t.__name__}


def _limit(resource: object, name: str, soft: int, hard: int) -> None:
    try:
        resource.setrlimit(getattr(resource, name), (soft, hard))  # type: ignore[attr-defined]
    except (ValueError, OSError, AttributeError):
        pass  # a limit the platform does not support: the others (and the kernel boundary) still apply


def main(payload_text: str) -> None:
    import builtins
    import json
    import os
    import resource
    import sys

    payload = json.loads(payload_text)
    lim = payload["limits"]
    cpu = int(lim["cpu_seconds"])
    _limit(resource, "RLIMIT_CPU", cpu, cpu + 1)
    _limit(resource, "RLIMIT_AS", int(lim["memory_bytes"]), int(lim["memory_bytes"]))
    _limit(resource, "RLIMIT_FSIZE", int(lim["file_bytes"]), int(lim["file_bytes"]))
    _limit(resource, "RLIMIT_NOFILE", int(lim["open_files"]), int(lim["open_files"]))
    _limit(resource, "RLIMIT_NPROC", int(lim["processes"]), int(lim["processes"]))
    _limit(resource, "RLIMIT_CORE", 0, 0)
    steps = payload.get("steps")
    dumps, write, flush, exit_now = json.dumps, os.write, sys.stdout.flush, os._exit
    try:
        code = compile(payload["program"], "main.py", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
        sys.stderr.write(f"the program does not compile: {e!r}\n")
        exit_now(1)
    builtin_dict = vars(builtins)
    saved = dict(builtin_dict)
    namespace = {"__name__": "__main__", "__file__": "main.py", "__builtins__": builtins}
    sys.argv = ["main.py"]
    del payload
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
        import traceback

        traceback.print_exc()
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
    write(1, ("\n" + MARKER + dumps(results) + "\n").encode())
    exit_now(0)
