"""The flows of issue 11 that had no browser test, in a real Chromium with the keys a person
presses: the keys dialog on a busy machine, the leaderboard after a rubric round, the
per-question heatmap, the annotator's own page, image import, today's reviews, the error pages
and the images list."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.models import Candidate, CandidateStatus, Preference, Review

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

Q1 = "What is this dish and how is it made?"
Q2 = "Which region of France is this dish traditionally from?"


def slow_cpu(page, rate: int = 20) -> None:
    """Chromium's CPU slowed `rate` times, as on a loaded CI machine: the browser's rendering
    updates (and with them its focus fix-ups) come late."""
    page.context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": rate})


def test_keys_dialog_closed_with_esc_never_takes_the_next_enter(make_image, alice, log_in):
    """The cause of the flaky test_review_and_adjudicate_with_the_keyboard: after ? and Esc the
    focus stayed on the closed dialog's "Turn them off" button until the browser's next
    rendering update, so on a busy machine Enter pressed it (a full page load to /review/, the
    same question, shortcuts off) instead of submitting the review."""
    make_image("img-1", [Q1, Q2])
    a = log_in("alice")
    page = a.page
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    page.goto("/review/")
    expect(page.get_by_test_id("question")).to_have_text(Q1)

    # Enter in the open dialog closes it (its Close button has the focus), nothing else.
    page.keyboard.press("?")
    dialog = page.locator("#keys-help")
    expect(dialog.get_by_role("button", name="Close (Esc)")).to_be_focused()
    page.keyboard.press("Enter")
    expect(dialog).to_be_hidden()

    slow_cpu(page)
    page.evaluate("window.__gamutMarker = 'still-here'")
    for following in (Q2, None):
        # No wait between the keys: what a quick person (or a loaded machine) does.
        page.keyboard.press("?")
        page.keyboard.press("Escape")
        page.keyboard.press("a")
        page.keyboard.press("Enter")
        if following:
            expect(page.get_by_test_id("question")).to_have_text(following)
        else:
            expect(page.get_by_test_id("empty")).to_be_visible()
    assert page.evaluate("window.__gamutMarker") == "still-here", "the page was reloaded"
    assert not [url for url in posts if "/preferences/" in url]
    assert not Preference.objects.filter(user=alice, single_key_shortcuts=False).exists()
    assert Review.objects.filter(annotator=alice, decision="accept").count() == 2
    assert set(Candidate.objects.values_list("status", flat=True)) == {CandidateStatus.OPEN}
    assert a.errors == []
