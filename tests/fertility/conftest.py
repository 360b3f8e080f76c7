"""Tokenizers loaded once per test session (loading o200k takes seconds)."""

from __future__ import annotations

import shutil
from contextlib import contextmanager

import pytest

from fertility.tokenizers import load_tokenizer


@pytest.fixture(scope="session")
def gpt2(shipped_tokenizers):
    return load_tokenizer("gpt2", shipped_tokenizers)


@pytest.fixture(scope="session")
def o200k(shipped_tokenizers):
    return load_tokenizer("o200k_base", shipped_tokenizers)


@pytest.fixture(scope="session")
def shared_tok(shared_tokenizers):
    """Load a reference tokenizer from ../shared/tokenizers by known name, once per session."""
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = load_tokenizer(name, shared_tokenizers)
        return cache[name]

    return get


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture
def browser_page():
    """``with browser_page(width, height) as (page, problems, dialogs)``: a page in the system's headless
    Chromium (Playwright), with every console error or warning, page error and dialog collected, for the
    caller to assert empty. Skips where Chromium or Playwright is missing (``make test`` brings both)."""
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH (make test installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is installed by make test")

    @contextmanager
    def open_page(width: int, height: int):
        problems, dialogs = [], []
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)
            try:
                page = browser.new_page(viewport={"width": width, "height": height})
                page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
                page.on("pageerror", lambda e: problems.append(str(e)))
                page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
                yield page, problems, dialogs
            finally:
                browser.close()

    return open_page
