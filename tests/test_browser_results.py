"""The result pages in a real Chromium: they render under the strict CSP (no console error, no
inline script or style), and the selectors move between judges and settings."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.utils import timezone

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
    expect(page.locator("h2").first).to_have_text("gpt-judge · working draft")
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


def test_the_release_selector_works_from_the_keyboard(root, log_in):
    """A release cut before a human round keeps its scores; the keyboard alone moves the
    leaderboard to the working draft, where the revised question waits, and the results menu
    keeps the choice."""
    from playwright.sync_api import expect

    from judging.releases.services import create_release
    from judging.tests.conftest import add_checks
    from rubrics.models import RubricVersion

    world = build_world()
    create_release("v1.0")
    q1 = world["questions"][1]
    version = RubricVersion.objects.create(
        rubric=q1.rubric, stage="human_1", meta_rubric={}, frozen_at=timezone.now()
    )
    add_checks(version, ("answer_critical", "valuable", "context", "valuable"))
    person = log_in("root")
    page = person.page

    page.goto("/leaderboard/?judge=gemini-judge")
    expect(page.locator("h1")).to_have_text("Leaderboard · v1.0")
    expect(page.get_by_test_id("rejudge")).to_have_count(0)
    release = page.get_by_label("Release")
    release.focus()
    page.keyboard.press("End")  # the last option: the working draft
    expect(release).to_have_value("draft")
    for _ in range(3):  # past the judge and the setting, to the Show button
        page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Show")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"release=draft"))
    expect(page.locator("h1")).to_have_text("Leaderboard · working draft")
    expect(page.get_by_test_id("rejudge")).to_contain_text("3 responses wait")
    page.get_by_role("link", name="Judges compared").click()
    expect(page).to_have_url(re.compile(r"/leaderboard/judges/\?release=draft"))
    expect(page.get_by_label("Release")).to_have_value("draft")
    assert person.errors == []
