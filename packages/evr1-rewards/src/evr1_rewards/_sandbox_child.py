"""The sandbox's child side: runs inside the sandboxed interpreter, before the untrusted program.

Never imported by evr1_rewards itself: `sandbox.run_python` starts `python -I -S -B -c <stub>`, and the stub loads
this file's code object through `SourceFileLoader.get_code`, which reuses the cached bytecode (compiling this file on
every run would cost more than everything else the sandbox adds). Arguments: CPU seconds, address-space bytes,
file-size bytes, process count, working directory, program path. It sets the resource limits, installs the audit
hook, then executes the program as `__main__`. Stdlib only, and no `re`/`json` (each import costs start-up time).
"""

import builtins
import os
import resource
import sys

DENY = frozenset(
    {
        "socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "socket.sendto",
        "socket.gethostbyname", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
        "os.startfile", "subprocess.Popen", "pty.spawn", "os.kill", "os.killpg", "signal.pthread_kill",
        "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "ctypes.call_function", "gc.get_objects",
        "gc.get_referrers", "gc.get_referents", "resource.setrlimit", "resource.prlimit", "os.chroot", "os.setuid",
        "os.setgid", "sys.setprofile", "sys.settrace", "urllib.Request", "http.client.connect", "ftplib.connect",
        "smtplib.connect", "webbrowser.open", "sys._getframe", "sys._current_frames", "sys._getframemodulename",
    }
)  # fmt: skip
FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back", "f_locals", "f_globals"})
"""Frames would expose the test harness's locals (the completion nonce) to the program: refused."""
DENY_IMPORT = frozenset({"ctypes", "_ctypes", "cffi", "_posixsubprocess", "multiprocessing", "_multiprocessing"})
PATH_EVENTS = frozenset(
    {
        "os.remove", "os.rename", "os.mkdir", "os.rmdir", "os.symlink", "os.link", "os.chmod", "os.chown",
        "os.truncate", "os.utime", "shutil.rmtree", "shutil.copyfile", "shutil.move", "os.mkfifo", "os.mknod",
    }
)  # fmt: skip
LIST_EVENTS = frozenset({"os.listdir", "os.scandir"})
DEV_OK = ("/dev/null", "/dev/urandom", "/dev/random", "/dev/zero")
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
PATHLIKE = (str, bytes, os.PathLike)


def _limit(res: int, soft: int, hard: int | None = None) -> None:
    try:
        resource.setrlimit(res, (soft, soft if hard is None else hard))
    except (ValueError, OSError):
        pass  # a limit the platform does not support: the others still apply


def _make_hook(root: str, read_ok: tuple[str, ...]):  # type: ignore[no-untyped-def]
    """The audit hook confining a program to `root` (writes) and `root` + the library paths (reads)."""
    realpath, join, getcwd, fspath = os.path.realpath, os.path.join, os.getcwd, os.fspath

    def resolve(p: object) -> str:
        try:
            p = fspath(p)  # type: ignore[arg-type, call-overload]
            if isinstance(p, bytes):
                p = p.decode("utf-8", "replace")
            return realpath(join(getcwd(), p))  # type: ignore[arg-type, call-overload, no-any-return]
        except Exception:
            return "/"

    def inside(path: str, prefixes: tuple[str, ...]) -> bool:
        return (path + os.sep).startswith(prefixes)

    def hook(event: str, args: tuple) -> None:
        if event in DENY:
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "object.__getattr__" and len(args) > 1 and args[1] in FRAME_ATTRS:
            raise PermissionError(f"sandbox: reading {args[1]} is not allowed")
        if event == "import" and args and str(args[0]).split(".")[0] in DENY_IMPORT:
            raise PermissionError(f"sandbox: importing {args[0]} is not allowed")
        if event == "open" and args and not isinstance(args[0], int):
            path = resolve(args[0])
            mode = args[1] if len(args) > 1 else None
            flags = args[2] if len(args) > 2 else 0
            write = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & WRITE_FLAGS)
            if write:
                if not inside(path, (root,)) and path != "/dev/null":
                    raise PermissionError(f"sandbox: writing {path} is not allowed")
            elif not (inside(path, (root, *read_ok)) or path in DEV_OK):
                raise PermissionError(f"sandbox: reading {path} is not allowed")
        elif event in PATH_EVENTS:
            for a in args[:2]:
                if isinstance(a, PATHLIKE) and not inside(resolve(a), (root,)):
                    raise PermissionError(f"sandbox: {event} outside the working directory is not allowed")
        elif (
            event in LIST_EVENTS
            and args
            and isinstance(args[0], PATHLIKE)
            and not inside(resolve(args[0]), (root, *read_ok))
        ):
            raise PermissionError(f"sandbox: listing {args[0]} is not allowed")  # type: ignore[str-bytes-safe]

    return hook


def _prepare(argv: list[str]) -> tuple[int, int, tuple[str, ...], object]:
    """Limits shared by every run (memory, file size, files, no cores); returns cpu, nproc, read paths, code."""
    cpu, mem, fsize, nproc = (int(a) for a in argv[:4])
    _limit(resource.RLIMIT_AS, mem)
    _limit(resource.RLIMIT_FSIZE, fsize)
    _limit(resource.RLIMIT_NOFILE, 64)
    _limit(resource.RLIMIT_CORE, 0)
    read_ok = tuple(os.path.realpath(p) + os.sep for p in sys.path if p and os.path.isdir(p))
    with open(argv[5], encoding="utf-8", errors="replace") as f:
        code = compile(f.read(), "main.py", "exec")
    # -S skips `site`, which is what defines exit() and quit(); programs use them.
    builtins.exit = builtins.quit = sys.exit  # type: ignore[attr-defined, assignment]
    return cpu, nproc, read_ok, code


# Captured before any program runs, so a program that rebinds builtins cannot change what the checks below do.
_type, _bool, _len, _dict_items = type, bool, len, dict.items
_PLAIN = frozenset({int, float, str, bool, bytes, complex, type(None)})
_SEQ = frozenset({list, tuple, set, frozenset})


def _plain(x: object, depth: int = 0) -> bool:
    """Built-in values only: a program's object with a rigged `__eq__`/`__bool__` never passes a test."""
    t = _type(x)
    if t in _PLAIN:
        return True
    if depth > 40:
        return False
    if t in _SEQ:  # explicit loops: `all` is looked up in builtins, which the program may have rebound
        for v in x:  # type: ignore[attr-defined]  # noqa: SIM110
            if not _plain(v, depth + 1):
                return False
        return True
    if t is dict:
        for k, v in _dict_items(x):  # type: ignore[arg-type, var-annotated]  # noqa: SIM110
            if not (_plain(k, depth + 1) and _plain(v, depth + 1)):
                return False
        return True
    return False


def _evr1_eq(a: object, b: object) -> bool:
    return _plain(a) and _plain(b) and _bool(a == b)


def _evr1_truth(v: object) -> bool:
    return _plain(v) and _bool(v)


def _run(code: object, cpu: int, nproc: int, root: str, read_ok: tuple[str, ...], suffix: object = None) -> None:
    """Limits, hook, then the program as __main__; then the test code (`suffix`) in the same namespace."""
    _limit(resource.RLIMIT_CPU, cpu, cpu + 1)
    _limit(resource.RLIMIT_NPROC, nproc)
    sys.addaudithook(_make_hook(os.path.realpath(root) + os.sep, read_ok))
    sys.argv = ["main.py"]
    namespace = {"__name__": "__main__", "__file__": "main.py", "__builtins__": builtins}
    exec(code, namespace)  # type: ignore[arg-type]
    if suffix is not None:
        namespace["__evr1_eq"], namespace["__evr1_truth"] = _evr1_eq, _evr1_truth
        exec(suffix, namespace)  # type: ignore[arg-type]


def main(argv: list[str]) -> None:
    """One run: cpu, mem, fsize, nproc, root, program (stdin/stdout are the caller's pipes)."""
    cpu, nproc, read_ok, code = _prepare(argv)
    _run(code, cpu, nproc, argv[4], read_ok)


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code & 0xFF
    print(e.code, file=sys.stderr)
    return 1


def zygote(argv: list[str]) -> None:
    """Many runs of one program: fork a fresh child per test (no interpreter start-up per test).

    argv: cpu, mem, fsize, nproc, root, program, wall seconds, number of tests. Test i runs in root/t<i> with stdin
    root/.io/in<i> and stdout/stderr root/.io/out<i> / err<i>; a line "i returncode timed_out" reports each result.
    The zygote is never hooked (it only runs this code); each child installs the hook before the program starts.
    """
    import time

    cpu, nproc, read_ok, code = _prepare(argv)
    root, wall, n = argv[4], float(argv[6]), int(argv[7])
    io = os.path.join(root, ".io")
    for i in range(n):
        suffix = nonce = None
        suffix_path = os.path.join(io, f"suffix{i}")
        if os.path.exists(suffix_path):
            # Test code that runs after the program; only if it finishes is the nonce (unknown to the program,
            # outside its readable paths) written, so exit(0) or os._exit(0) before the tests cannot pass them.
            with open(suffix_path, encoding="utf-8") as f:
                suffix = compile(f.read(), "tests.py", "exec")
            with open(os.path.join(io, f"nonce{i}"), "rb") as f:
                nonce = f.read()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            rc = 1
            try:
                os.chdir(os.path.join(root, f"t{i}"))
                for fd, name, flags in ((0, "in", os.O_RDONLY), (1, "out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                        (2, "err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):  # fmt: skip
                    new = os.open(os.path.join(io, f"{name}{i}"), flags, 0o600)
                    os.dup2(new, fd)
                    os.close(new)
                done = os.open(os.path.join(io, f"done{i}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                write = os.write
                _run(code, cpu, nproc, os.getcwd(), read_ok, suffix)
                if nonce is not None:
                    write(done, nonce)
                rc = 0
            except SystemExit as e:
                rc = _exit_code(e)
            except BaseException as e:
                sys.__excepthook__(_type(e), e, e.__traceback__)  # C implementation: needs no frame access
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(rc)
        deadline = time.monotonic() + wall
        timed_out = False
        delay = 0.0005
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                timed_out = True
                os.kill(pid, 9)
                _, status = os.waitpid(pid, 0)
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.01)
        sys.stdout.write(f"{i} {os.waitstatus_to_exitcode(status)} {int(timed_out)}\n")
    sys.stdout.flush()


if __name__ == "__evr1_sandbox_child__":
    if sys.argv[1] == "zygote":
        zygote(sys.argv[2:])
    else:
        main(sys.argv[1:])
