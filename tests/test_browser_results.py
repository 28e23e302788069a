"""The result pages in a real Chromium: they render under the strict CSP (no console error, no
inline script or style), and the selectors move between judges and settings."""

from __future__ import annotations

import re

import pytest
from django.conf import settings

from conftest import png_bytes
from judging.tests.test_analysis_pages import build_world

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_result_pages_render_under_the_csp(root, log_in, screenshot):
    from playwright.sync_api import expect

    build_world()
    photo = settings.MEDIA_ROOT / "images" / "q0.png"
    photo.parent.mkdir(parents=True, exist_ok=True)
    photo.write_bytes(png_bytes())
    person = log_in("root")
    page = person.page

    page.goto("/leaderboard/")
    page.get_by_role("link", name="Multimodal against text-only").click()
    expect(page.get_by_test_id("settings").locator("tbody tr")).to_have_count(3)
    page.get_by_label("Judge").select_option("gpt-judge")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("h2").first).to_have_text("gpt-judge")
    screenshot(page, "results-settings")

    page.get_by_role("link", name="Judges compared").click()
    page.get_by_label("Setting").select_option("text_only")
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(r"setting=text_only"))
    expect(page.get_by_test_id("confusion")).to_be_visible()
    expect(page.get_by_test_id("self-preference")).to_contain_text("gemini")
    screenshot(page, "results-judges")

    page.get_by_role("link", name="Per question").click()
    page.get_by_role("link", name="q0").click()
    expect(page.get_by_test_id("checks")).to_contain_text("Braised in red wine.")
    # The photo loads after the page does: wait for it, then check it is the real one.
    page.wait_for_function(
        "() => { const img = document.querySelector('.photo img');"
        " return img !== null && img.complete; }"
    )
    assert page.locator(".photo img").evaluate("img => img.naturalWidth") == 32
    expect(page.get_by_test_id("response")).to_have_count(6)
    screenshot(page, "results-question")
    assert person.errors == []
