"""report.md takes run names, model names, benchmark notes and settings from files anyone can write: each reaches the
Markdown as literal text (`md_text`), never as HTML or Markdown structure. Attack: a run folder named
`<script>alert(1)</script>`, a manifest whose model is `<img src=x onerror=alert(1)>`, a note with `| fake | row |`."""

from __future__ import annotations

from pathlib import Path

import pytest

from evr1_eval.report import RunReport, md_text, write_report
from evr1_eval.types import BenchmarkSummary

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (SCRIPT, "&lt;script&gt;alert(1)&lt;/script&gt;"),
        ("a | b", "a \\| b"),
        ("[click](javascript:x)", "\\[click\\](javascript:x)"),
        ("line\n# heading", "line # heading"),
        ("`code` *em* _em_ ~~s~~", "\\`code\\` \\*em\\* \\_em\\_ \\~\\~s\\~\\~"),
        ("m_avg & qwen_vl", "m_avg &amp; qwen_vl"),  # an underscore inside a word means nothing: kept
    ],
)
def test_md_text_makes_any_text_literal(text: str, shown: str) -> None:
    assert md_text(text) == shown


def test_report_md_escapes_names_models_and_notes(tmp_path: Path) -> None:
    summary = BenchmarkSummary(
        benchmark="mvbench",
        primary="accuracy",
        metrics={"accuracy": 50.0},
        counts={"total": 2},
        notes=(f"note {SCRIPT} | fake | row |",),
    )
    manifest = {"model": IMG, "protocol": {"protocol": "official"}, "backend": {"engine": SCRIPT}}
    runs = [RunReport(SCRIPT, str(tmp_path), {"mvbench": summary}, manifests={"mvbench": manifest})]
    write_report(runs, tmp_path / "rep", chart="none")
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "<script" not in md  # before: copied verbatim
    assert "<img" not in md
    assert "| fake | row |" not in md
    assert "&lt;script&gt;" in md
    assert "&lt;img src=x onerror=alert(1)&gt;" in md
