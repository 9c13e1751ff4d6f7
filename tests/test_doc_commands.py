"""The docs run: every command in README.md and docs/*.md has a way to be exercised (testenv/doc_commands.py), the
light ones are checked or run here; `evr1-train` commands and the config keys are checked in the train session
(packages/evr1-train/tests/test_doc_config.py). Light: evr1-cache, evr1-eval and evr1-rewards only."""

from __future__ import annotations

import functools
import re
import runpy
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parents[1]
docs = runpy.run_path(str(ROOT / "testenv" / "doc_commands.py"))
COMMANDS = docs["all_commands"]()


def by_kind(kind: str) -> list[Any]:
    return [c for c in COMMANDS if [r.kind for r in docs["rule_for"](c)] == [kind]]


def test_every_doc_command_has_exactly_one_way_to_be_exercised() -> None:
    assert len(COMMANDS) > 100  # README + docs/*.md: the extraction finds them
    bad = [f"{c.where}: {c.text} -> {[r.kind for r in docs['rule_for'](c)]}" for c in COMMANDS if len(docs["rule_for"](c)) != 1]  # fmt: skip
    assert not bad, "doc commands without exactly one rule in testenv/doc_commands.py:\n" + "\n".join(bad)


def test_the_registry_names_only_commands_the_docs_still_have() -> None:
    texts = {c.key for c in COMMANDS}
    stale = sorted(set(docs["RUN"]) - texts) + sorted(set(docs["COVERED"]) - texts)
    assert not stale, f"registry entries no doc quotes any more: {stale}"


def test_extraction_joins_continuations_and_drops_comments(tmp_path: Path) -> None:
    md = tmp_path / "x.md"
    md.write_text("a `evr1-eval list` b\n```bash\nevr1-cache build d \\\n  --out c/   # why\n# only a comment\n```\n")
    root = docs["ROOT"]
    try:
        docs["extract"].__globals__["ROOT"] = tmp_path
        got = [(c.line, c.text) for c in docs["extract"](md)]
    finally:
        docs["extract"].__globals__["ROOT"] = root
    assert got == [(1, "evr1-eval list"), (3, "evr1-cache build d --out c/")]


@functools.cache
def help_text(exe: str, *words: str) -> str:
    proc = subprocess.run([exe, *words, "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{' '.join(words)} --help failed: {proc.stderr[-2000:]}"
    return proc.stdout


def test_every_light_cli_command_names_a_real_subcommand_and_real_flags(console: Callable[[str], str]) -> None:
    problems = []
    for cmd in by_kind("cli"):
        prog, *rest = cmd.argv
        if prog == "evr1-train":
            continue  # the train session checks these (evr1-train is not installed here)
        sub = [rest[0]] if rest and not rest[0].startswith("-") else []
        if sub and not re.search(rf"\b{re.escape(sub[0])}\b", help_text(console(prog))):
            problems.append(f"{cmd.where}: {prog} has no subcommand {sub[0]!r}")
            continue
        text = help_text(console(prog), *sub)
        problems += [f"{cmd.where}: {prog} {' '.join(sub)} has no {f}" for f in cmd.flags() if f not in text]
    assert not problems, "\n".join(problems)


def test_every_nox_command_names_a_session() -> None:
    sessions = docs["nox_sessions"]()
    assert {"lint", "train", "gpu_check_cpu", "rewards", "cache", "eval"} <= sessions
    problems = []
    for cmd in by_kind("nox"):
        args = cmd.argv[1:]
        named = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-s", "--session")]
        named += [n for a in args if a.startswith("-s") and len(a) > 2 for n in [a[2:]]]
        problems += [f"{cmd.where}: no nox session {n!r}" for n in named if n not in sessions and not n.isupper()]
    assert not problems, "\n".join(problems)


def test_every_benchmark_command_names_a_script_with_those_flags() -> None:
    problems = []
    for cmd in by_kind("script"):
        script = ROOT / cmd.argv[1]
        if not script.is_file():
            problems.append(f"{cmd.where}: no file {cmd.argv[1]}")
            continue
        source = script.read_text(encoding="utf-8")
        if script.suffix == ".sh":  # gpu_check.sh passes its arguments to gpu_check.py
            source += (ROOT / "benchmarks" / "gpu_check.py").read_text(encoding="utf-8")
        problems += [f"{cmd.where}: {cmd.argv[1]} defines no {f}" for f in cmd.flags() if f'"{f}"' not in source]
    assert not problems, "\n".join(problems)


def members() -> dict[str, dict[str, Any]]:
    return {
        p.parent.name: tomllib.loads(p.read_text())["project"] for p in sorted(ROOT.glob("packages/*/pyproject.toml"))
    }


def test_every_pip_command_installs_a_member_and_its_extras() -> None:
    problems = []
    for cmd in by_kind("pip"):
        req = cmd.argv[2]
        name, _, extras = req.partition("[")
        if "<" in name:  # a placeholder (`evr1-<name>`): some member must fit it
            fits = [m for m in members() if re.fullmatch(re.sub(r"<[^>]+>", ".+", name), m)]
            problems += [] if fits else [f"{cmd.where}: no member fits {name}"]
            continue
        project = members().get(name)
        if project is None:
            problems.append(f"{cmd.where}: {name} is not a workspace member")
            continue
        missing = {e for e in extras.rstrip("]").split(",") if e} - set(project.get("optional-dependencies", {}))
        problems += [f"{cmd.where}: {name} has no extra {e!r}" for e in sorted(missing)]
    assert not problems, "\n".join(problems)


def test_every_module_command_names_an_existing_module() -> None:
    import importlib.util

    for cmd in by_kind("module"):
        assert importlib.util.find_spec(cmd.argv[2]) is not None, f"{cmd.where}: no module {cmd.argv[2]}"


def _dist(name: str) -> str:
    return re.split(r"[\s\[<>=(]", name.strip(), maxsplit=1)[0].lower()


def test_the_readme_package_table_names_every_dependency() -> None:
    """The README's 'pulls' column lists exactly each package's direct dependencies (pyproject `dependencies`)."""
    rows = re.findall(r"^\| \[`(evr1-[a-z]+)`\]\([^)]*\) \|[^|]*\| ([^|]*) \|$", (ROOT / "README.md").read_text(), re.M)
    assert {name for name, _ in rows} == set(members()), rows
    problems = []
    for name, pulls in rows:
        listed = set() if pulls.strip().startswith("nothing") else {_dist(p) for p in pulls.split(",")}
        declared = {_dist(d) for d in members()[name].get("dependencies", [])}
        if listed != declared:
            problems.append(f"README.md, {name}: lists {sorted(listed)}, pyproject declares {sorted(declared)}")
    assert not problems, "\n".join(problems)


def test_the_light_doc_commands_run_on_tiny_inputs(dataset: Any, tmp_path: Path, console: Callable[[str], str]) -> None:
    """The commands of `RUN` in a folder holding what their placeholder paths name: `data/train.jsonl` (a generated
    dataset), `videos/clip 01.mp4`; `cache/` is what the build command writes and the next ones read."""
    import shutil

    shutil.copytree(dataset.root, tmp_path / "data")
    (tmp_path / "videos").mkdir()
    shutil.copy(dataset.videos[0], tmp_path / "videos" / "clip 01.mp4")
    outputs = {}
    for text in docs["RUN"]:
        cmd = next((c for c in COMMANDS if c.key == text), None)
        assert cmd is not None, f"{text!r} is quoted nowhere"
        argv = cmd.argv
        if "<key>.safetensors" in text:
            argv = [*argv[:-1], str(next((tmp_path / "cache" / "videos").rglob("*.safetensors")))]
        exe = sys.executable if argv[0].startswith("python") else console(argv[0])
        cwd = ROOT if argv[1].startswith("benchmarks/") else tmp_path  # the docs run scripts from the repository root
        proc = subprocess.run([exe, *argv[1:]], cwd=cwd, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{cmd.where}: {text} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        outputs[text] = proc.stdout
    assert "qwen3_vl" in outputs["evr1-eval list --presets"]
    assert "train_8b" in outputs["python3 benchmarks/gpu_check.py --plan"]
    assert any((tmp_path / "cache" / "videos").rglob("*.safetensors"))
