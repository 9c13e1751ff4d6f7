"""Test environment only: every command quoted in README.md and docs/*.md, and the registry saying how each is exercised.

Commands come from fenced ```bash blocks (continuation lines joined, `# comments` dropped) and from inline code spans
that start with a program (`evr1-*`, `uv run`, `uvx nox`, `python`, `bash`, `pip install`, ...). Each one must match
exactly one rule of `RULES`; a command no rule matches fails `tests/test_doc_commands.py` (so a new doc command needs a
way to be exercised before it can be merged). What each kind of rule does:

- `cli`: an evr1 console script (`evr1-cache`, `evr1-eval`, `evr1-rewards`, `evr1-train SUBCOMMAND`): the subcommand
  exists and every `--flag` the doc writes is one the subcommand's `--help` lists; the light ones also in `RUN`.
- `hydra`: `evr1-train` with Hydra overrides: the train session composes the real config with them (every key and
  preset exists, the engine's config checks pass); `COVERED` names the tests that run them for real.
- `nox`: `uvx nox -s NAME`: NAME is a session of noxfile.py.
- `script`: a file under benchmarks/ with its flags: the file exists and defines each `--flag`.
- `pip`: `pip install DIST[EXTRA]`: DIST is a workspace member and EXTRA one of its extras.
- `external`: what evr1 does not own (Ray's cluster start-up, verl's model merger): the reason is recorded and the
  train session checks the module exists.

Loaded by path (testenv/ is not an installed package): `runpy.run_path(ROOT / "testenv" / "doc_commands.py")`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ("evr1-cache", "evr1-eval", "evr1-rewards", "evr1-train", "uv run", "uvx", "nox", "python", "python3",
            "bash", "pip install", "ray", ".nox/")  # fmt: skip


@dataclass(frozen=True)
class DocCommand:
    """One command as the docs write it, where."""

    file: str
    line: int
    text: str

    @property
    def argv(self) -> list[str]:
        words = shlex.split(self.text.replace("...", ""))
        while words and words[0] in ("uv", "run", "uvx"):  # `uv run X` / `uvx X` run X
            words = words[1:]
        while words[:1] == ["--with"]:  # `uv run --with PKG X`
            words = words[2:]
        return words

    @property
    def key(self) -> str:
        """The text without a leading `uv run` / `uvx` (how `RUN` and `COVERED` name it)."""
        text = self.text
        for prefix in ("uv run ", "uvx "):
            text = text.removeprefix(prefix)
        return text

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def flags(self) -> list[str]:
        return [w.split("=")[0] for w in self.argv if w.startswith("--") and len(w) > 2]


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _strip_comment(line: str) -> str:
    """Drop a trailing `# comment` (a `#` after whitespace, outside quotes)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def extract(path: Path) -> list[DocCommand]:
    """The commands of one Markdown file, in order."""
    rel = path.relative_to(ROOT).as_posix()
    out: list[DocCommand] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    fenced, pending, start = False, "", 0
    for n, raw in enumerate(lines, 1):
        if raw.startswith("```"):
            fenced = raw.strip() == "```bash"
            continue
        if fenced:
            text = _strip_comment(raw)
            if not text.strip():
                continue
            if not pending:
                start = n
            pending += " " + text.strip()
            if pending.endswith("\\"):
                pending = pending[:-1]
                continue
            if DocCommand(rel, start, pending).argv:
                out.append(DocCommand(rel, start, " ".join(pending.split())))
            pending = ""
            continue
        for span in re.findall(r"`([^`]+)`", raw):
            cmd = DocCommand(rel, n, span.strip())
            if ((span.startswith(PROGRAMS) and " " in span) or span in ("evr1-train", "uvx nox")) and cmd.argv:
                out.append(cmd)
    return out


def all_commands() -> list[DocCommand]:
    return [c for f in doc_files() for c in extract(f)]


# -- the registry ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """Commands whose normalised text matches `pattern` are exercised as `kind` says (see the module docstring)."""

    kind: str
    pattern: str
    reason: str = ""

    def matches(self, cmd: DocCommand) -> bool:
        return re.fullmatch(self.pattern, " ".join(cmd.argv)) is not None


RULES = (
    Rule("cli", r"evr1-(cache|eval|rewards)( .*)?"),
    Rule("cli", r"evr1-train (export-heldout|merge|view|parity)( .*)?"),
    Rule("hydra", r"evr1-train( (?!export-heldout|merge|view|parity)\S+)*"),
    Rule("nox", r"nox( .*)?"),
    Rule("script", r"(python3?|bash|\.nox/\S+/bin/python) benchmarks/\S+( .*)?"),
    Rule("pip", r"pip install (?!uv$)\S+"),
    Rule("module", r"python -m evr1_\S+( .*)?"),
    Rule("external", r"pip install uv", "installs uv itself (the workspace's tool), from PyPI"),
    Rule("external", r"python main\.py", "how a submitted program runs inside the code sandbox (docs/rewards.md)"),
    Rule("external", r"ray start( .*)?", "a Ray cluster's start-up on each node (Ray's own command, docs/train.md)"),
    Rule("external", r"python -m verl\.model_merger( .*)?", "verl's checkpoint merger (verl's own module)"),
)

#: Commands that are run for real on tiny inputs by tests/test_doc_commands.py (light session), after the placeholder
#: paths of the docs are replaced by a generated dataset: {doc command: why it is enough}.
RUN = {
    "evr1-eval list": "no input",
    "evr1-eval list --presets": "no input",
    "evr1-cache build data/train.jsonl --out cache/ --fps 2 --max-frames 64 --max-pixels 200704 --workers 2": "tiny data",
    "evr1-cache verify cache/": "the cache just built",
    'evr1-cache probe "videos/clip 01.mp4"': "a generated clip named with a space",
    "evr1-cache inspect cache/videos/<spec>/<ab>/<key>.safetensors": "an entry of the cache just built",
    "python3 benchmarks/gpu_check.py --plan": "stdlib only",
}

#: Training commands that tests run for real (tiny settings), not only compose: {doc command: (test file, a line of
#: that file which runs it)}; the train session checks each file still holds its line.
_PEFT = "packages/evr1-train/tests/test_engine_peft.py"
COVERED = {
    "evr1-train": ("tests/test_roundtrip.py", '_run([_bin("evr1-train"), *overrides], cwd=root)'),
    "evr1-train export-heldout runs/quickstart runs/quickstart/heldout": ("tests/test_roundtrip.py", '"export-heldout"'),
    "evr1-train +experiment=quickstart_lora": (_PEFT, 'experiment="quickstart_lora"'),
    "evr1-train merge runs/quickstart_lora": (_PEFT, "def test_merge_writes_a_full_model_that_computes_the_same"),
    "evr1-train +experiment=quickstart_sft": (_PEFT, 'experiment="quickstart_sft",'),
    "evr1-train +experiment=quickstart_sft_rl": (_PEFT, 'experiment="quickstart_sft_rl"'),
    "evr1-train +experiment=quickstart_agent": ("tests/test_roundtrip.py", '"+experiment=quickstart_agent"'),
    "evr1-train +experiment=quickstart_qwen3_vl": ("packages/evr1-train/tests/test_engine_local.py", 'experiment="quickstart_qwen3_vl"'),
}  # fmt: skip


def rule_for(cmd: DocCommand) -> list[Rule]:
    return [r for r in RULES if r.matches(cmd)]


def hydra_overrides(cmd: DocCommand) -> list[str]:
    """The Hydra overrides of an `evr1-train` command (placeholders such as `...` dropped)."""
    return [w for w in cmd.argv[1:] if "=" in w]


def nox_sessions() -> set[str]:
    """Session names defined in noxfile.py (read, not imported: nox is not installed in the test venvs)."""
    text = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    names = set(re.findall(r"^def (\w+)\(session: nox\.Session\)", text, re.M))
    light = re.search(r"^LIGHT = \[([^\]]*)\]", text, re.M)
    if light:
        names |= {n.strip().strip('"').removeprefix("evr1-") for n in light.group(1).split(",")}
    return names - {"run"}


#: Dotted names in those sections that are not config keys: {name: what it is}. Module paths of evr1_train
#: (`engine.memory.state_bytes`), file names (`data.jsonl`) and wildcards (`actor_rollout_ref.model.lora_*`) are told
#: apart by rule (`is_code_or_file`); these are the rest.
NOT_CONFIG_KEYS = {
    "trainer.LocalTrainer": "the class in evr1_train/engine/trainer.py (a docstring's module reference)",
    "trainer.on_rollout": "the LocalTrainer attribute (rollout dumps hook)",
    "engine.total_steps": "an alias of trainer.total_training_steps that LocalConfig reads (engine/config.py Source)",
    "trainer.total_trainng_steps": "the misspelling docs/train.md shows the start-up check refusing",
}
_FILE_SUFFIXES = {"jsonl", "json", "parquet", "yaml", "py", "mp4", "md", "png", "html", "safetensors"}


def is_code_or_file(key: str) -> bool:
    """A module path of evr1_train (`engine.memory.state_bytes`), a file name or a wildcard, not a config key."""
    import importlib.util

    parts = key.lstrip("+").split(".")
    if parts[-1] in _FILE_SUFFIXES or key.endswith("_"):
        return True
    for i in range(2, len(parts) + 1):
        try:
            if importlib.util.find_spec("evr1_train." + ".".join(parts[:i])) is not None:
                return True
        except ModuleNotFoundError:
            return False
    return False


#: Config keys quoted in docs and docstrings are those that start with one of these sections.
CONFIG_SECTIONS = ("data", "actor_rollout_ref", "trainer", "algorithm", "reward", "evr1", "engine", "critic")
#: A dotted name followed by `/` is a schema name (`evr1.prompt/1`, `evr1.rollouts/1`), not a key.
_KEY = re.compile(r"(?<![\w./-])\+?(?:" + "|".join(CONFIG_SECTIONS) + r")(?:\.[A-Za-z_][\w]*)+(?![\w/])")


def _python_texts(path: Path) -> list[str]:
    """A module's string constants (docstrings, messages) and comments: where config keys are quoted (code
    identifiers such as `trainer.step()` are not keys)."""
    import ast
    import io
    import tokenize

    source = path.read_text(encoding="utf-8")
    texts = [n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    texts += [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    return texts


def quoted_keys() -> dict[str, str]:
    """{config key: first place it is quoted} from the docs' code spans and bash blocks and the packages' docstrings,
    messages and comments. A key with a leading `+` is one the docs add (Hydra's append)."""
    found: dict[str, str] = {}
    sources = [*doc_files(), *sorted((ROOT / "packages").glob("*/src/**/*.py"))]
    for path in sources:
        if path.suffix == ".md":
            text = path.read_text(encoding="utf-8")
            spans = re.findall(r"`([^`\n]+)`", text) + re.findall(r"```bash\n(.*?)```", text, re.S)
        else:
            spans = _python_texts(path)
        for span in spans:
            for key in _KEY.findall(span):
                found.setdefault(key.rstrip("."), path.relative_to(ROOT).as_posix())
    return found
