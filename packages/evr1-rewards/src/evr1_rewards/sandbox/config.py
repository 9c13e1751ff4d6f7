"""Which boundary runs `code` answers, chosen by configuration — and a refusal when there is none.

Order: an explicit `SandboxConfig` (e.g. `RewardRouter(sandbox=SandboxConfig(...))`, the verl / TRL / serve options)
over the environment (`EVR1_SANDBOX` = auto | bwrap | sandbox_fusion | unsafe_local, `EVR1_SANDBOX_FUSION_URL`,
`EVR1_SANDBOX_WORKERS`, `EVR1_SANDBOX_PYTHON`). `auto` (the default) takes a SandboxFusion service when a URL is
configured, else bubblewrap when it is installed and works here. With neither, `code` refuses to run
(`SandboxUnavailableError`, naming the fixes) unless `unsafe_local=True` was chosen — a plain child process with
limits, for trusted data only, with a warning.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal, TypeVar

from evr1_rewards.errors import RewardConfigError, one_of
from evr1_rewards.sandbox.types import Backend, SandboxUnavailableError

log = logging.getLogger(__name__)

_T = TypeVar("_T")
BackendName = Literal["auto", "bwrap", "sandbox_fusion", "unsafe_local"]
BACKENDS: tuple[BackendName, ...] = ("auto", "bwrap", "sandbox_fusion", "unsafe_local")


@dataclass(frozen=True, slots=True)
class SandboxConfig:
    """How code answers are run.

    Attributes:
        backend: "auto" (SandboxFusion when `url` is set, else bubblewrap), "bwrap", "sandbox_fusion" or
            "unsafe_local" (the same as `unsafe_local=True`).
        url: SandboxFusion base URL (`http://host:8080`); its `/run_code` endpoint is called.
        workers: sandboxes running at once in this process (bwrap default: CPUs; SandboxFusion default: 8). The tests
            of one answer run in parallel up to this limit.
        unsafe_local: run without a boundary (trusted data only; logs a warning).
        python: the interpreter inside a local sandbox (default: this one's base install when the sandbox can read
            it, else the system python3).
    """

    backend: BackendName = "auto"
    url: str | None = None
    workers: int | None = None
    unsafe_local: bool = False
    python: str | None = None

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise RewardConfigError(f"sandbox backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.workers is not None and (not isinstance(self.workers, int) or self.workers < 1):
            raise RewardConfigError(f"sandbox workers must be a positive integer, got {self.workers!r}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SandboxConfig:
        env = os.environ if env is None else env
        backend = one_of("EVR1_SANDBOX", env.get("EVR1_SANDBOX", "auto").strip().lower() or "auto", BACKENDS)
        workers = env.get("EVR1_SANDBOX_WORKERS")
        try:
            n = int(workers) if workers else None
        except ValueError:
            raise RewardConfigError(f"EVR1_SANDBOX_WORKERS must be an integer, got {workers!r}") from None
        return cls(
            backend=backend,
            url=env.get("EVR1_SANDBOX_FUSION_URL") or None,
            workers=n,
            python=env.get("EVR1_SANDBOX_PYTHON") or None,
        )

    @classmethod
    def coerce(cls, value: object) -> SandboxConfig | None:
        """A config from a mapping (adapter kwargs), a backend name or URL string, or None (use the environment)."""
        if value is None or isinstance(value, SandboxConfig):
            return value
        if isinstance(value, str):
            if value.startswith(("http://", "https://")):
                return cls(backend="sandbox_fusion", url=value)
            return cls(backend=one_of("sandbox backend", value, BACKENDS))
        if isinstance(value, Mapping):
            known = {"backend", "url", "workers", "unsafe_local", "python"}
            unknown = set(value) - known
            if unknown:
                raise RewardConfigError(f"unknown sandbox settings {sorted(unknown)}; use {sorted(known)}")
            given = {k: v for k, v in value.items() if v is not None}
            return cls(
                backend=one_of("sandbox backend", given.get("backend", "auto"), BACKENDS),
                url=_optional("sandbox url", given.get("url"), str, "a string"),
                workers=_optional("sandbox workers", given.get("workers"), int, "a positive integer"),
                unsafe_local=bool(given.get("unsafe_local", False)),
                python=_optional("sandbox python", given.get("python"), str, "a string"),
            )
        raise RewardConfigError(f"sandbox must be a SandboxConfig, a mapping or a backend name, got {value!r}")


def _optional(what: str, value: object, kind: type[_T], noun: str) -> _T | None:
    """`value` when it is None or a `kind` (a bool is no integer), else a RewardConfigError naming `what`."""
    if value is None or (isinstance(value, kind) and not isinstance(value, bool)):
        return value
    raise RewardConfigError(f"{what} must be {noun}, got {value!r}")


_FIX = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; it needs unprivileged user namespaces), or point "
    "evr1 at a SandboxFusion service (EVR1_SANDBOX_FUSION_URL=http://host:8080, or SandboxConfig(url=...)), or - for "
    "trusted data only - opt out of the boundary with SandboxConfig(unsafe_local=True) / EVR1_SANDBOX=unsafe_local"
)
_BACKENDS: dict[SandboxConfig, Backend] = {}
_LOCK = threading.Lock()
_WARNED: set[str] = set()


def effective(config: SandboxConfig | None) -> SandboxConfig:
    """The explicit config, or the environment's; an explicit config without a URL still honours the env URL."""
    env = SandboxConfig.from_env()
    if config is None:
        return env
    if config.url is None and env.url is not None and config.backend in ("auto", "sandbox_fusion"):
        config = replace(config, url=env.url)
    return config


def backend_for(config: SandboxConfig | None = None) -> Backend:
    """The backend `config` selects (cached per configuration). Raises SandboxUnavailableError with the fixes."""
    cfg = effective(config)
    hit = _BACKENDS.get(cfg)
    if hit is not None:
        return hit
    with _LOCK:
        hit = _BACKENDS.get(cfg)
        if hit is None:
            hit = _BACKENDS[cfg] = _build(cfg)
    return hit


def _build(cfg: SandboxConfig) -> Backend:
    if cfg.unsafe_local or cfg.backend == "unsafe_local":
        from evr1_rewards.sandbox.unsafe import UnsafeLocalBackend

        if "unsafe" not in _WARNED:
            _WARNED.add("unsafe")
            log.warning(
                "evr1-rewards: code answers run WITHOUT a sandbox boundary (unsafe_local=True): only for trusted data"
            )
        return UnsafeLocalBackend(**({"python": cfg.python} if cfg.python else {}))
    if cfg.backend == "sandbox_fusion" or (cfg.backend == "auto" and cfg.url):
        if not cfg.url:
            raise SandboxUnavailableError(
                "the sandbox_fusion backend needs a URL: EVR1_SANDBOX_FUSION_URL or SandboxConfig(url=...)"
            )
        from evr1_rewards.sandbox.fusion import SandboxFusionBackend

        return SandboxFusionBackend(cfg.url, workers=cfg.workers or 8)
    from evr1_rewards.sandbox.bwrap import BwrapBackend, probe, sandbox_python

    exe = shutil.which("bwrap")
    if exe is None:
        raise SandboxUnavailableError(f"the code type needs a sandbox and bubblewrap (bwrap) is not installed: {_FIX}")
    try:
        python, prefix = sandbox_python(cfg.python)
    except FileNotFoundError as e:
        raise SandboxUnavailableError(f"{e}: {_FIX}") from None
    reason = probe(exe, python, prefix)
    if reason is not None:
        raise SandboxUnavailableError(f"bubblewrap is installed but cannot start a sandbox here ({reason}): {_FIX}")
    return BwrapBackend(exe, python, prefix, workers=cfg.workers or max(1, len(os.sched_getaffinity(0))))


def describe(config: SandboxConfig | None = None) -> str:
    """One line for `evr1-rewards list`: which boundary `code` gets here, or why there is none."""
    try:
        b = backend_for(config)
    except SandboxUnavailableError as e:
        return f"none - code answers are refused: {e}"
    if b.name == "bwrap":
        return "bubblewrap: own user/pid/mount/net/ipc/uts namespaces, uid 65534, read-only runtime, private /tmp"
    if b.name == "sandbox_fusion":
        return f"SandboxFusion at {getattr(b, 'url', '?')}"
    return "unsafe_local: NO boundary (trusted data only)"
