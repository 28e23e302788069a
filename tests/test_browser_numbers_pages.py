"""Issue 24 sections 2 and 4 in a real Chromium, by mouse and by keys: buttons that say what
they will do, tables and charts that look finished, pages that fit a phone, right-to-left text
isolated."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_crag_mm_button_says_check_on_a_dry_run_and_import_otherwise(root, log_in):
    page = log_in("root").page
    page.goto("/import/crag-mm/")
    form = page.locator("#crag-mm-form")
    button = form.get_by_role("button", name="Check")
    expect(button).to_be_visible()
    # By mouse: untick "Dry run", the button now imports.
    form.get_by_label("Dry run (write nothing)").click()
    expect(form.locator("button[type=submit]")).to_have_text("Import")
    # By keys: Space on the focused box ticks it again.
    form.get_by_label("Dry run (write nothing)").focus()
    page.keyboard.press("Space")
    expect(form.locator("button[type=submit]")).to_have_text("Check")
