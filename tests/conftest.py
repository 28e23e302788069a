"""Fixtures of the browser tests: Debian's Chromium (never a downloaded one) and people who log
in through the login page, each in a browser context of their own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import override_settings

CHROMIUM = Path("/usr/bin/chromium")
SKIP_NO_CHROMIUM = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"browser tests need Chromium at {CHROMIUM}, which is absent"
)
# Where screenshots go when GAMUT_SHOTS names a folder (never the repository); unset: none.
SHOTS = os.environ.get("GAMUT_SHOTS")
ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("browser"):
            item.add_marker(SKIP_NO_CHROMIUM)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright's launch arguments, pointed at the system Chromium."""
    return {
        **browser_type_launch_args,
        "executable_path": str(CHROMIUM),
        "headless": True,
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ],
    }


def build_docs(site: Path, config: Path = ROOT / "mkdocs.yml") -> subprocess.CompletedProcess:
    """mkdocs build of the documentation into `site`, as make docs runs it: strict by
    mkdocs.yml's own settings (a broken link or anchor fails), not by a flag of ours."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-f", str(config), "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


@pytest.fixture(scope="session")
def docs_site(tmp_path_factory) -> Path:
    """The documentation built strictly, once a session, into a folder of its own, and served
    at /docs/ from it (not from the checkout's site/, which may be stale or absent)."""
    site = tmp_path_factory.mktemp("docs-site")
    built = build_docs(site)
    assert built.returncode == 0, built.stdout + built.stderr
    with override_settings(DOCS_ROOT=site):
        yield site


@pytest.fixture(scope="session")
def live_server(docs_site, live_server):
    """pytest-django's live server, started after the docs are built: it reads its middleware,
    and with it where the docs are, once as it starts."""
    return live_server


class Person:
    """One person's browser context and page, with the console errors the page reported."""

    def __init__(self, context, page, username: str):
        self.context = context
        self.page = page
        self.username = username
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))

    def _console(self, msg) -> None:
        # The browser asks for /favicon.ico on its own; the site has none, and that is no error
        # of the page's.
        if msg.type == "error" and not msg.location.get("url", "").endswith("/favicon.ico"):
            self.errors.append(msg.text)


@pytest.fixture
def log_in(browser, live_server):
    """log_in("alice") -> Person: a fresh browser context, logged in through the login page."""
    from playwright.sync_api import expect

    people: list[Person] = []

    def log_in(username: str) -> Person:
        context = browser.new_context(
            base_url=live_server.url, viewport={"width": 1280, "height": 900}
        )
        context.set_default_timeout(10_000)
        person = Person(context, context.new_page(), username)
        people.append(person)
        page = person.page
        page.goto("/login/")
        page.get_by_label("User name").fill(username)
        page.get_by_label("Password").fill(f"{username}-pass")
        page.get_by_label("Password").press("Enter")
        expect(page).to_have_url(re.compile(r"/$"))
        expect(page.locator(".topbar .logout span")).to_have_text(username)
        return person

    yield log_in
    for person in people:
        person.context.close()


@pytest.fixture
def screenshot():
    """screenshot(page, "review") saves a full-page PNG under $GAMUT_SHOTS when it is set."""

    def take(page, name: str) -> None:
        if SHOTS:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)

    return take
