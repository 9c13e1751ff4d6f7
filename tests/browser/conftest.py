"""Headless Chromium (Debian's /usr/bin/chromium) driven by Playwright, and the sites the browser tests open.

Playwright's own browser download cannot work offline, so the system Chromium is launched by path
(`EVR1_CHROMIUM` overrides it). Screenshots go to `EVR1_SCREENSHOTS` (default `.artifacts/viewer/`, git-ignored).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("EVR1_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = Path(os.environ.get("EVR1_SCREENSHOTS") or ROOT / ".artifacts" / "viewer")
#: Quiet, offline Chromium: no sandbox as root (containers), no background connections.
ARGS = ["--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
        "--disable-default-apps", "--mute-audio"]  # fmt: skip


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: apt-get install chromium (or set EVR1_CHROMIUM)")
    args = [*ARGS, *(["--no-sandbox"] if os.geteuid() == 0 else [])]
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=args)
        yield b
        b.close()


class Page:
    """A Playwright page that records console errors, page errors and every request outside the site folder."""

    def __init__(self, browser: Any, site: Path) -> None:
        self.site = site.resolve()
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.page = browser.new_page(viewport={"width": 1360, "height": 900})
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", self._request)

    def _request(self, req: Any) -> None:
        url = req.url
        if not url.startswith(f"file://{self.site}/") and not url.startswith("data:"):
            self.outside.append(url)

    def open(self, name: str, fragment: str = "") -> Any:
        self.page.goto(f"file://{self.site}/{name}{fragment}")
        if name != "index.html":
            self.wait("document.body.dataset.ready === '1'")
        return self.page

    def wait(self, expression: str, timeout: float = 15.0) -> Any:
        """Poll a JS expression until truthy. (Playwright's wait_for_function polls with eval(), which the pages'
        Content-Security-Policy rightly forbids; `evaluate` runs through the DevTools protocol instead.)"""
        deadline = time.monotonic() + timeout
        while True:
            value = self.page.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {expression!r}")
            time.sleep(0.05)

    def shot(self, name: str, *, full: bool = False, element: Any = None) -> Path:
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / f"{name}.png"
        if element is not None:
            element.screenshot(path=str(path))
        else:
            self.page.screenshot(path=str(path), full_page=full)
        return path


@pytest.fixture
def open_page(browser: Any) -> Iterator[Any]:
    pages: list[Page] = []

    def make(site: Path) -> Page:
        p = Page(browser, site)
        pages.append(p)
        return p

    yield make
    for p in pages:
        errors, outside = p.errors, p.outside
        p.page.close()
        assert not errors, f"console/page errors: {errors}"  # incl. CSP violations
        assert not outside, f"requests outside the site folder: {outside}"


def script(name: str) -> str:
    """A console script of the venv under test (next to this interpreter), else one on PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.is_file() else shutil.which(name)
    if not found:
        pytest.fail(f"console script {name!r} is not installed in {sys.prefix}")
    return found


def read_index(site: Path, slug: str) -> dict[str, Any]:
    text = (site / "data" / slug / "index.js").read_text()
    return json.loads(text[len("EVR1.index(") : -len(");\n")])
