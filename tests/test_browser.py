"""The review flow in a real Chromium, keyboard only: two annotators review an image's two
candidates blind, an adjudicator settles both disputes, and the database records it all.

Run the screenshots with GAMUT_SHOTS=/tmp/gamut-shots (see tests/conftest.py)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from annotation.models import (
    Adjudication,
    Candidate,
    CandidateOrigin,
    CandidateStatus,
    Review,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

Q1 = "What is this dish and how is it made?"
Q2 = "Which region of France is this dish traditionally from?"
# alice's revision of Q2: she deletes the "?" and types the rest.
Q2_REVISED = "Which region of France is this dish traditionally from, and when is it eaten?"


def question(page: Page):
    return page.get_by_test_id("question")


def decision(page: Page, value: str):
    return page.locator(f'#panel input[name="decision"][value="{value}"]')


def revision(page: Page):
    return page.locator('#panel textarea[name="revised_text"]')


def set_marker(page: Page) -> None:
    """A value on window survives an htmx swap and disappears on any page load."""
    page.evaluate("window.__gamutMarker = 'still-here'")


def expect_no_reload(page: Page) -> None:
    assert page.evaluate("window.__gamutMarker") == "still-here", "the page was reloaded"


def test_review_and_adjudicate_with_the_keyboard(make_image, alice, bob, carol, log_in, screenshot):
    image, (c1, c2) = make_image("img-1", [Q1, Q2])

    # --- alice reviews both candidates with the keyboard ------------------------------------
    a = log_in("alice")
    page = a.page
    page.goto("/review/")
    expect(question(page)).to_have_text(Q1)
    expect(page.get_by_test_id("waiting")).to_have_text("2")
    expect(revision(page)).to_be_hidden()  # until she chooses revise

    page.keyboard.press("?")
    dialog = page.locator("#keys-help")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Toggle a reason")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()

    set_marker(page)
    page.keyboard.press("a")
    expect(decision(page, "accept")).to_be_checked()
    page.keyboard.press("Enter")
    expect(question(page)).to_have_text(Q2)
    expect(page.get_by_role("status")).to_have_text("Review saved.")
    expect(page.get_by_test_id("done-today")).to_have_text("1")
    expect_no_reload(page)
    expect(decision(page, "accept")).not_to_be_checked()

    expect(revision(page)).to_be_hidden()
    page.keyboard.press("r")
    area = revision(page)
    expect(area).to_be_visible()
    expect(area).to_be_focused()
    expect(area).to_have_value(Q2)
    page.keyboard.press("Backspace")  # the caret is at the end: drop the "?"
    page.keyboard.type(", and when is it eaten?")  # letters typed here are text, not keys
    expect(area).to_have_value(Q2_REVISED)
    expect(decision(page, "revise")).to_be_checked()
    page.keyboard.press("Escape")
    expect(area).not_to_be_focused()
    page.keyboard.press("1")
    expect(page.locator('#panel input[name="reasons"][value="leading"]')).to_be_checked()
    screenshot(page, "review")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("empty")).to_be_visible()
    expect(page.get_by_test_id("done-today")).to_have_text("2")
    expect_no_reload(page)

    assert set(Review.objects.filter(annotator=alice).values_list("candidate", "decision")) == {
        (c1.pk, "accept"),
        (c2.pk, "revise"),
    }
    assert set(Candidate.objects.values_list("status", flat=True)) == {CandidateStatus.OPEN}

    # --- bob: blind to alice's reviews while the candidates are open -------------------------
    b = log_in("bob")
    page = b.page
    page.goto("/review/")
    expect(question(page)).to_have_text(Q1)
    expect(page.locator('#panel input[name="decision"]:checked')).to_have_count(0)
    expect(page.locator('#panel input[name="reasons"]:checked')).to_have_count(0)
    expect(page.locator(".review-card")).to_have_count(0)
    assert "alice" not in page.content()

    set_marker(page)
    page.keyboard.press("d")
    expect(decision(page, "discard")).to_be_checked()
    page.keyboard.press("Enter")
    expect(question(page)).to_have_text(Q2)
    expect_no_reload(page)
    # alice's revision of this one is nowhere on bob's page, not even in the hidden box
    expect(revision(page)).to_have_value(Q2)
    expect(revision(page)).to_be_hidden()
    assert "eaten" not in page.content()
    assert "alice" not in page.content()
    expect(page.locator('#panel input[name="reasons"]:checked')).to_have_count(0)

    page.keyboard.press("a")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("empty")).to_be_visible()
    expect_no_reload(page)

    c1.refresh_from_db()
    c2.refresh_from_db()
    assert (c1.status, c2.status) == (CandidateStatus.DISPUTED, CandidateStatus.DISPUTED)

    # --- carol settles both disputes, seeing both reviews side by side ----------------------
    c = log_in("carol")
    page = c.page
    page.goto("/adjudicate/")
    expect(page.get_by_test_id("waiting")).to_have_text("2")
    expect(question(page)).to_have_text(Q1)
    first, second = page.get_by_test_id("review-1"), page.get_by_test_id("review-2")
    expect(first).to_contain_text("alice")
    expect(first.locator(".decision")).to_have_text("Accept")
    expect(second).to_contain_text("bob")
    expect(second.locator(".decision")).to_have_text("Discard")

    set_marker(page)
    page.keyboard.press("a")
    expect(decision(page, "accept")).to_be_checked()
    page.keyboard.press("Enter")
    expect(question(page)).to_have_text(Q2)
    expect(page.get_by_role("status")).to_have_text("Decision saved.")
    expect_no_reload(page)

    first, second = page.get_by_test_id("review-1"), page.get_by_test_id("review-2")
    expect(first).to_contain_text("alice")
    expect(first.locator(".decision")).to_have_text("Revise")
    expect(first.locator(".diff del")).to_have_text("from?")
    expect(first.locator(".diff ins")).to_have_text("from, and when is it eaten?")
    expect(first.locator(".tags")).to_contain_text("Leading")
    expect(second).to_contain_text("bob")
    expect(second.locator(".decision")).to_have_text("Accept")
    expect(second.locator(".diff")).to_have_count(0)
    expect(revision(page)).to_be_hidden()
    screenshot(page, "adjudicate")

    page.keyboard.press("1")  # take alice's revision
    expect(decision(page, "revise")).to_be_checked()
    area = revision(page)
    expect(area).to_be_visible()
    expect(area).to_have_value(Q2_REVISED)
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("empty")).to_be_visible()
    expect(page.get_by_test_id("waiting")).to_have_text("0")
    expect_no_reload(page)

    for person in (a, b, c):
        assert person.errors == [], f"{person.username}'s console: {person.errors}"

    # --- what the database must hold ---------------------------------------------------------
    reviews = {
        (r.annotator.username, r.candidate_id): r
        for r in Review.objects.select_related("annotator")
    }
    assert {key: r.decision for key, r in reviews.items()} == {
        ("alice", c1.pk): "accept",
        ("alice", c2.pk): "revise",
        ("bob", c1.pk): "discard",
        ("bob", c2.pk): "accept",
    }
    assert all(r.seconds is not None for r in reviews.values())
    assert reviews["alice", c2.pk].revised_text == Q2_REVISED
    assert reviews["alice", c2.pk].reasons == ["leading"]
    assert reviews["bob", c1.pk].reasons == []
    assert {r.slot for r in reviews.values() if r.candidate_id == c1.pk} == {1, 2}

    c1.refresh_from_db()
    c2.refresh_from_db()
    assert c1.status == CandidateStatus.ACCEPTED
    assert c2.status == CandidateStatus.REVISED

    settled = {
        adj.candidate_id: adj
        for adj in Adjudication.objects.select_related("adjudicator", "chosen_review")
    }
    assert set(settled) == {c1.pk, c2.pk}
    assert all(adj.adjudicator == carol and adj.seconds is not None for adj in settled.values())
    assert settled[c1.pk].decision == "accept"
    assert settled[c2.pk].decision == "revise"
    assert settled[c2.pk].revised_text == Q2_REVISED
    assert settled[c2.pk].chosen_review == reviews["alice", c2.pk]

    # the picked revision is a new candidate of the next round, credited to alice
    child = Candidate.objects.get(parent=c2)
    assert child.text == Q2_REVISED
    assert child.round == c2.round + 1
    assert child.origin == CandidateOrigin.ADJUDICATION
    assert child.author == alice
    assert child.status == CandidateStatus.OPEN
    assert child.image_id == image.pk
    assert Candidate.objects.count() == 3  # accepted c1 has no child
