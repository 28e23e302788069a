"""Fixtures of the browser tests: Debian's Chromium (never a downloaded one) and people who log
in through the login page, each in a browser context of their own."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
SKIP_NO_CHROMIUM = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"browser tests need Chromium at {CHROMIUM}, which is absent"
)
# Where screenshots go when GAMUT_SHOTS names a folder (never the repository); unset: none.
SHOTS = os.environ.get("GAMUT_SHOTS")


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
