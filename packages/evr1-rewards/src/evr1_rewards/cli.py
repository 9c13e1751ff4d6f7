"""`evr1-rewards list | score | validate | serve`.

Examples:
  evr1-rewards list
  evr1-rewards validate train.jsonl                 # every ground truth parses for its problem type
  evr1-rewards score preds.jsonl -o scored.jsonl    # jsonl in -> scored jsonl + per-type summary (resumable)
  evr1-rewards serve --host 127.0.0.1 --port 8000   # OpenRLHF: --reward.remote_url http://127.0.0.1:8000/get_reward
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from evr1_rewards.errors import MissingExtraError, RewardError
from evr1_rewards.ground_truth import parse_ground_truth
from evr1_rewards.integrations._common import merge_extras
from evr1_rewards.registry import describe_types, normalize_problem_type
from evr1_rewards.router import RewardRouter
from evr1_rewards.sandbox.config import SandboxConfig
from evr1_rewards.types import RewardInput

RESPONSE_KEYS = ("response", "prediction", "output", "completion", "model_output")
TRUTH_KEYS = ("ground_truth", "answer", "solution", "label", "gt")
ID_KEYS = ("id", "sample_id", "problem_id", "uid")
EXTRA_KEYS = ("options", "image_size", "width", "height", "box_format", "pred_box_format", "gt_box_format", "official",
              "rel_tol", "abs_tol", "timeout", "memory_mb", "math_timeout", "anls_threshold")  # fmt: skip


def _first(row: Mapping[str, object], keys: Sequence[str], override: str | None) -> object:
    if override:
        return row.get(override)
    return next((row[k] for k in keys if k in row), None)


def _rows(path: Path) -> Iterator[tuple[int, dict[str, object] | None, str | None]]:
    """(line number, row or None, error) for every non-empty line; a JSON array file is read whole, so a syntax
    error in it, like a file that is not UTF-8, stops the command with a `file:line` error instead of a traceback."""
    try:
        yield from _read_rows(path)
    except UnicodeDecodeError as e:
        with path.open("rb") as f:
            line = next((i for i, raw in enumerate(f, 1) if not _is_utf8(raw)), 1)
        raise RewardError(f"{path}:{line}: not UTF-8 ({e.reason}): save the file as UTF-8") from None
    except json.JSONDecodeError as e:
        raise RewardError(
            f"{path}:{e.lineno}: invalid JSON array ({e.msg}, column {e.colno}): fix it, or write one JSON object "
            "per line (JSONL), where a bad line is reported and skipped"
        ) from None


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _read_rows(path: Path) -> Iterator[tuple[int, dict[str, object] | None, str | None]]:
    with path.open(encoding="utf-8") as f:
        head = f.read(1)
        f.seek(0)
        if head == "[":
            data = json.load(f)
            for i, row in enumerate(data, 1):
                yield (i, row, None) if isinstance(row, dict) else (i, None, "not a JSON object")
            return
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                yield i, None, f"invalid JSON: {e}"
                continue
            yield (i, row, None) if isinstance(row, dict) else (i, None, "not a JSON object")


def _extras(row: Mapping[str, object]) -> dict[str, object]:
    """Scorer extras of a row: its known top-level keys, then its `extras` object; None values are absent keys."""
    return merge_extras({k: row[k] for k in EXTRA_KEYS if k in row}, row.get("extras"))


def _router(args: argparse.Namespace) -> RewardRouter:
    given = args.sandbox_fusion_url or args.unsafe_local
    return RewardRouter(
        {"accuracy": args.accuracy_weight, "format": 1.0 - args.accuracy_weight}, mode=args.mode, think=args.think,
        sandbox=SandboxConfig(url=args.sandbox_fusion_url, unsafe_local=args.unsafe_local) if given else None,
        end_of_turn_tokens=args.end_of_turn_token,
    )  # fmt: skip


class _Bar(Protocol):
    """What the scoring loop needs of a progress bar (tqdm's, or the no-op one)."""

    def update(self, n: int = 1) -> object: ...

    def close(self) -> None: ...


def _progress(total: int | None, desc: str) -> _Bar:
    """tqdm when installed (it is optional: the core imports no third-party package), else a no-op."""
    try:
        from tqdm import tqdm
    except ImportError:

        class _Null:
            def update(self, n: int = 1) -> None: ...
            def close(self) -> None: ...

        return _Null()
    return tqdm(total=total, desc=desc, unit="sample", file=sys.stderr)


def cmd_list(args: argparse.Namespace) -> int:
    from evr1_rewards.sandbox import describe

    infos = describe_types()
    if args.json:
        print(json.dumps([{"type": i.name, "aliases": list(i.aliases), "missing": list(i.missing),
                           "extra": i.extra, "description": i.description} for i in infos], indent=2))  # fmt: skip
        return 0
    for info in infos:
        missing = f'  [needs: pip install "evr1-rewards[{info.extra}]"]' if info.missing else ""
        print(f"{info.name:26s} {info.description}{missing}")
        if info.aliases:
            print(f"{'':26s} aliases: {', '.join(info.aliases)}")
    print(f"\ncode sandbox: {describe()}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    path = Path(args.data)
    errors = 0
    counts: dict[str, int] = defaultdict(int)
    bar = _progress(None, "validate")
    for line, row, err in _rows(path):
        bar.update()
        if row is None:
            print(f"{path}:{line}: {err}", file=sys.stderr)
            errors += 1
            continue
        ptype = row.get(args.type_key) or args.problem_type
        sid = _first(row, ID_KEYS, None)
        where = f"{path}:{line}" + (f" (id {sid})" if sid is not None else "")
        try:
            if not ptype:
                raise RewardError(f"no {args.type_key!r} field (or pass --problem-type)")
            gt = _first(row, TRUTH_KEYS, args.gt_key)
            counts[parse_ground_truth(str(ptype), gt, _extras(row)).problem_type] += 1
        except RewardError as e:
            print(f"{where}: {e}", file=sys.stderr)
            errors += 1
    bar.close()
    for key, n in sorted(counts.items()):
        print(f"{key:26s} {n:8d} ok")
    print(f"{sum(counts.values())} ground truths ok, {errors} errors" + (" - fix the rows above" if errors else ""))
    return 1 if errors else 0


def cmd_score(args: argparse.Namespace) -> int:
    if args.workers < 1:
        raise RewardError(f"--workers must be >= 1, got {args.workers}")
    src = Path(args.predictions)
    out = Path(args.output) if args.output else src.with_name(src.stem + ".scored.jsonl")
    partial = out.with_name(out.name + ".partial")
    router = _router(args)
    done: set[str] = set()
    if partial.exists():
        # Resume: keep only complete lines of the previous run, then skip their keys.
        good = []
        for line in partial.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            good.append(line)
            done.add(str(row["_key"]))
        partial.write_text("".join(g + "\n" for g in good), encoding="utf-8")
    bad_lines = 0

    def score_row(item: tuple[int, str, dict[str, object]]) -> tuple[dict[str, object], str | None]:
        line, key, row = item
        rec: dict[str, object] = {"_key": key, **row}
        try:
            ptype = row.get(args.type_key) or args.problem_type
            if not ptype:
                raise RewardError(f"no {args.type_key!r} field (or pass --problem-type)")
            res = router.score(
                RewardInput(
                    response=str(_first(row, RESPONSE_KEYS, args.response_key) or ""),
                    ground_truth=_first(row, TRUTH_KEYS, args.gt_key),
                    problem_type=str(ptype),
                    extras=_extras(row),
                    sample_id=key,
                )
            )
        except RewardError as e:
            rec["reward_error"] = str(e)
            return rec, f"{src}:{line}: {e}"
        rec["reward"] = {**res.as_dict(), "problem_type": res.problem_type, "details": dict(res.details)}
        return rec, None

    bar = _progress(None, "score")
    chunk: list[tuple[int, str, dict[str, object]]] = []
    # Rows are scored on `--workers` threads (code and math wait on subprocesses) in chunks, written in input order.
    with partial.open("a", encoding="utf-8") as f, ThreadPoolExecutor(max_workers=args.workers) as pool:

        def flush() -> None:
            for rec, message in pool.map(score_row, chunk):
                if message:
                    print(message, file=sys.stderr)
                f.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")
                bar.update()
            f.flush()
            chunk.clear()

        for lineno, row, err in _rows(src):
            if row is None:
                print(f"{src}:{lineno}: {err}", file=sys.stderr)
                bad_lines += 1
                continue
            sid = _first(row, ID_KEYS, None)
            key = str(sid) if sid is not None else f"line{lineno}"
            if key in done:
                bar.update()
                continue
            chunk.append((lineno, key, row))
            if len(chunk) >= 8 * args.workers:
                flush()
        flush()
    bar.close()
    os.replace(partial, out)
    errors = bad_lines
    rewards: dict[str, list[tuple[float, float, float]]] = defaultdict(list)  # (overall, accuracy, format) by type
    for line in out.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        errors += "reward_error" in rec
        r = rec.get("reward")
        if isinstance(r, dict):
            rewards[r["problem_type"]].append((r["overall"], r["accuracy"], r["format"]))
    summary = {
        k: {"n": len(v), **{m: sum(t[i] for t in v) / len(v) for i, m in enumerate(("overall", "accuracy", "format"))}}
        for k, v in sorted(rewards.items())
    }
    print(f"{'type':26s} {'n':>7s} {'overall':>8s} {'accuracy':>8s} {'format':>8s}")
    for k, v in summary.items():
        print(f"{k:26s} {v['n']:7d} {v['overall']:8.4f} {v['accuracy']:8.4f} {v['format']:8.4f}")
    summary_path = out.with_name(out.stem + ".summary.json")
    tmp = summary_path.with_name(summary_path.name + ".tmp")
    tmp.write_text(json.dumps({"per_type": summary, "errors": errors}, indent=2), encoding="utf-8")
    os.replace(tmp, summary_path)
    print(f"wrote {out} and {summary_path}" + (f"; {errors} rows had errors (see above)" if errors else ""))
    return 1 if errors else 0


def cmd_serve(args: argparse.Namespace) -> int:
    from evr1_rewards.server import ServerLimits, check_bind, require_serve_extra, serve, server_tokens

    require_serve_extra()
    tokens = server_tokens(args.token)
    check_bind(args.host, tokens)
    if args.problem_type:
        normalize_problem_type(args.problem_type)
    router = _router(args)
    limits = ServerLimits(
        max_body_bytes=int(args.max_body_mb * (1 << 20)),
        read_timeout_s=args.read_timeout,
        backlog=args.backlog,
        header_timeout_s=args.header_timeout,
        max_samples=args.max_samples,
        ceilings={
            "timeout": args.max_code_timeout,
            "memory_mb": args.max_code_memory_mb,
            "max_tests": float(args.max_code_tests),
            "math_timeout": args.max_math_timeout,
        },
        client_queue=args.client_queue,
        total_queue=args.queue,
        code_slots=args.code_slots,
    )
    where = f"http://{args.host}:{args.port}/get_reward" + ("?token=..." if tokens else "")
    print(f"evr1-rewards: serving OpenRLHF rewards on {where}", flush=True)
    serve(args.host, args.port, router, args.problem_type, limits, log_level=args.log_level, tokens=tokens)
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=("reward", "metric"), default="reward", help="reward (strict) or metric")
    p.add_argument("--think", choices=("optional", "required", "forbidden"), default="optional")
    p.add_argument("--accuracy-weight", type=float, default=0.9, help="format weight is 1 - this (default 0.9)")
    p.add_argument("--problem-type", default=None, help="type for rows without one")
    p.add_argument(
        "--end-of-turn-token",
        action="append",
        default=[],
        metavar="TOKEN",
        help="another chat-template token to strip from the end of responses (repeatable)",
    )
    p.add_argument("--sandbox-fusion-url", default=None, help="run code answers on this SandboxFusion service")
    p.add_argument("--unsafe-local", action="store_true", help="run code answers WITHOUT a sandbox (trusted data only)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evr1-rewards", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="problem types, aliases and missing extras", epilog="example: evr1-rewards list")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_list)
    p = sub.add_parser(
        "validate", help="check that every ground truth parses", epilog="example: evr1-rewards validate train.jsonl"
    )
    p.add_argument("data", help="JSONL (or JSON array) with problem_type + answer/ground_truth [+ options/extras]")
    p.add_argument("--problem-type", default=None)
    p.add_argument("--type-key", default="problem_type")
    p.add_argument("--gt-key", default=None, help=f"ground-truth field (default: first of {', '.join(TRUTH_KEYS)})")
    p.set_defaults(fn=cmd_validate)
    p = sub.add_parser(
        "score", help="score a predictions JSONL", epilog="example: evr1-rewards score preds.jsonl -o scored.jsonl"
    )
    p.add_argument("predictions")
    p.add_argument("-o", "--output", default=None, help="default: <predictions>.scored.jsonl")
    p.add_argument("--type-key", default="problem_type")
    p.add_argument("--gt-key", default=None)
    p.add_argument("--response-key", default=None, help=f"default: first of {', '.join(RESPONSE_KEYS)}")
    p.add_argument("--workers", type=int, default=4, help="threads for scoring (code/math run subprocesses)")
    _common(p)
    p.set_defaults(fn=cmd_score)
    p = sub.add_parser(
        "serve", help="OpenRLHF remote reward server (needs evr1-rewards[serve])",
        epilog="example: evr1-rewards serve --port 8000  (OpenRLHF: --reward.remote_url http://HOST:8000/get_reward)",
    )  # fmt: skip
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--backlog", type=int, default=4096, help="listen backlog (queued connections)")
    p.add_argument("--max-body-mb", type=float, default=64.0, help="largest request body accepted (413 above)")
    p.add_argument("--read-timeout", type=float, default=30.0, help="seconds a request body may take to arrive (408)")
    p.add_argument("--header-timeout", type=float, default=10.0, help="seconds request headers may take (408)")
    p.add_argument("--max-samples", type=int, default=65536, help="most samples in one request (413 above)")
    p.add_argument("--token", action="append", default=[], metavar="TOKEN",
                   help="require this token (repeatable; also EVR1_REWARDS_TOKEN, comma-separated); needed to bind a "
                   "non-loopback address")  # fmt: skip
    p.add_argument("--max-code-timeout", type=float, default=5.0, help="ceiling on a request's extras.timeout (CPU s)")
    p.add_argument("--max-code-memory-mb", type=float, default=1024.0, help="ceiling on a request's extras.memory_mb")
    p.add_argument("--max-code-tests", type=int, default=1000, help="ceiling on a request's extras.max_tests")
    p.add_argument("--max-math-timeout", type=float, default=5.0, help="ceiling on a request's extras.math_timeout")
    p.add_argument("--client-queue", type=int, default=256, help="code answers one client may queue (429 above)")
    p.add_argument("--queue", type=int, default=1024, help="code answers all clients may queue (503 above)")
    p.add_argument(
        "--code-slots", type=int, default=None, help="code answers scored at once (default: sandbox workers)"
    )
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    _common(p)
    p.set_defaults(fn=cmd_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except (RewardError, OSError, MissingExtraError) as e:
        print(f"evr1-rewards: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
