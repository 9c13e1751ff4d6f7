"""evr1 workspace sessions: `nox -l` lists them; bare `nox` runs exactly what CI runs.

Light sessions (lint, imports, one per light package, integration, wheels) use uv venvs and never install torch.
Engine sessions (vLLM on CPU, verl on CPU) use pip venvs: pip honours the machine's own wheel configuration
(a local CPU build of torch), which uv does not read, and their pins (transformers) conflict, so each gets its own.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox

nox.needs_version = ">=2024.10.9"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.error_on_missing_interpreters = False

ROOT = Path(__file__).parent
PACKAGES = ROOT / "packages"
HOST = f"{sys.version_info.major}.{sys.version_info.minor}"
LIGHT = ["evr1-rewards", "evr1-cache", "evr1-eval"]
HEAVY = ("torch", "vllm", "verl", "ray", "transformers", "numpy", "tensorflow", "jax")
TEST_DEPS = ["pytest>=8.3", "hypothesis>=6.100", "pytest-timeout>=2.3"]


def member(name: str) -> Path:
    return PACKAGES / name


def closure(name: str) -> list[str]:
    """`name` plus the workspace members it depends on (leaves first), read from its pyproject."""
    deps = nox.project.load_toml(member(name) / "pyproject.toml")["project"]["dependencies"]
    out: list[str] = []
    for dep in deps:
        dist = dep.split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip()
        if dist.startswith("evr1-"):
            out += [n for n in closure(dist) if n not in out]
    return [*out, name]


def install(session: nox.Session, name: str, extras: str = "", *extra_reqs: str) -> None:
    """Install one member and the members it needs from local paths (never from an index), non-editable."""
    paths = [str(member(n)) for n in closure(name)]
    if extras:
        paths[-1] += f"[{extras}]"
    session.install(*paths, *TEST_DEPS, *test_group(name), *extra_reqs)


def test_group(name: str) -> list[str]:
    """A member's own `[dependency-groups] test` (test-only deps such as qwen-vl-utils for the parity grid)."""
    groups = nox.project.load_toml(member(name) / "pyproject.toml").get("dependency-groups", {})
    return [req for req in groups.get("test", []) if isinstance(req, str)]


def import_stays_light(session: nox.Session, module: str, banned: tuple[str, ...] = HEAVY) -> None:
    code = (
        f"import sys, {module}; bad = sorted({set(banned)!r} & {{m.split('.')[0] for m in sys.modules}}); "
        f"assert not bad, f'importing {module} pulled heavy modules: {{bad}}'; print('{module}: import is light')"
    )
    session.run("python", "-c", code)


@nox.session(python=HOST)
def lint(session: nox.Session) -> None:
    """ruff check + ruff format --check over the whole tree."""
    session.install("ruff>=0.15")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


def _light_session(package: str, extra_reqs: tuple[str, ...] = ()) -> None:
    """One light member in a fresh venv: its declared deps only (this is `pip install <package>`), then its tests."""

    def run(session: nox.Session) -> None:
        install(session, package, "", *extra_reqs)
        import_stays_light(session, package.replace("-", "_"), HEAVY if package == "evr1-rewards" else HEAVY[:5])
        session.run("pytest", str(member(package) / "tests"), *session.posargs)

    run.__doc__ = f"{package} alone in a fresh venv (its declared deps only): light-import check, then its tests."
    nox.session(name=package.removeprefix("evr1-"), python=HOST)(run)


for _pkg in LIGHT:
    _light_session(_pkg)


def install_torchvision_shim(session: nox.Session) -> None:
    """Test env only: drop CUDA-linked torchaudio/torchcodec and load testenv/torchvision_cpu_shim.py from a .pth."""
    session.run("python", "-m", "pip", "uninstall", "-y", "-q", "torchaudio", "torchcodec", silent=True)
    site = session.run("python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", silent=True).strip()
    shim = ROOT / "testenv" / "torchvision_cpu_shim.py"
    Path(site, "_evr1_tv_cpu_shim.py").write_text(shim.read_text())
    Path(site, "zz_evr1_tv_cpu_shim.pth").write_text("import _evr1_tv_cpu_shim\n")
