"""What a person did is what is recorded (issue 21, item 5), in Chromium: the issue's exact
sequence (Back then Forward on /review/, a different decision on the page shown) and the answer
to a page's old copy sent anyway (a notice that says what is recorded, and Change)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from annotation.models import Review

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_back_and_forward_never_bring_back_a_form_already_sent(make_image, alice, log_in):
    _, (one, two) = make_image("img-1", ["One?", "Two?"])
    person = log_in("alice")
    page = person.page
    page.goto("/review/")
    question = page.get_by_test_id("question")
    expect(question).to_have_text("One?")
    form = page.locator("#review-form")
    first_key = form.locator('input[name="submission_key"]').input_value()
    first_copy = page.locator("#panel").evaluate("panel => panel.outerHTML")
    page.keyboard.press("d")
    page.keyboard.press("Enter")
    expect(question).to_have_text("Two?")

    # Back, then Forward: the page is asked for anew (Cache-Control: no-store), never the copy
    # of One? with the key its discard was sent under.
    page.go_back()
    expect(page).to_have_url(re.compile(r"://[^/]+/$"))  # home, where she came from
    forward = page.go_forward()
    expect(question).to_have_text("Two?")
    assert form.locator('input[name="submission_key"]').input_value() != first_key
    assert forward is not None and "no-store" in forward.headers["cache-control"]
    # A different decision on the page shown is a decision about the question it shows.
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("empty")).to_be_visible()
    assert dict(Review.objects.values_list("candidate__text", "decision")) == {
        "One?": "discard",
        "Two?": "accept",
    }

    # Were the old copy sent anyway (a proxy's cache, a page kept open elsewhere), accept under
    # its key: not "Review saved." over the discard kept, but what is recorded, and Change.
    page.evaluate(
        """html => {
          document.getElementById("panel").outerHTML = html;
          htmx.process(document.getElementById("panel"));
        }""",
        first_copy,
    )
    expect(question).to_have_text("One?")
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    notice = page.locator("#panel .notice")
    expect(notice).to_contain_text("your answer to “One?” is Discard")
    expect(notice).to_contain_text("What you chose now was not recorded")
    expect(page.get_by_text("Review saved.")).to_have_count(0)
    assert Review.objects.get(candidate=one).decision == "discard"
    page.get_by_test_id("change-recorded").click()
    expect(question).to_have_text("One?")
    expect(page.locator('#panel input[name="decision"][value="discard"]')).to_be_checked()
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("empty")).to_be_visible()
    assert Review.objects.get(candidate=one).decision == "accept"
    assert Review.objects.get(candidate=two).decision == "accept"
    assert person.errors == []
