"""Issue 24, section 3's last plain-word places, in a real Chromium: the counter follows a
revision picked by mouse or key, a text over every field's limit is refused in words above the
form with what was typed kept, and the jobs page's and the release form's text fields show and
count their limits."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from annotation.models import Review
from annotation.review import services

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ANIMAL = "What is this animal?"
ALICE_REV = "What is this animal, and where does it live?"
BOB_REV = "Which animal is this, and what does it eat on a cold winter morning?"


def counter_of(page: Page, name: str):
    """The live counter right after the field (templates/_limit.html)."""
    return page.locator(f'[name="{name}"] + small.limit')


def test_a_picked_revision_is_counted_by_mouse_and_by_key(make_image, alice, bob, carol, log_in):
    _, (candidate,) = make_image("img-1", [ANIMAL])
    services.review_submit(
        user=alice, candidate_id=candidate.pk, decision="revise", revised_text=ALICE_REV
    )
    services.review_submit(
        user=bob, candidate_id=candidate.pk, decision="revise", revised_text=BOB_REV
    )
    person = log_in("carol")
    page = person.page
    page.goto("/adjudicate/")
    box = page.locator('#panel textarea[name="revised_text"]')
    counter = counter_of(page, "revised_text")

    page.get_by_role("button", name="1 Use Annotator 1's revision").click()
    expect(box).to_have_value(ALICE_REV)
    expect(counter).to_have_text(f"{len(ALICE_REV)} of 2,000 characters")

    page.keyboard.press("2")
    expect(box).to_have_value(BOB_REV)
    expect(counter).to_have_text(f"{len(BOB_REV)} of 2,000 characters")

    # and back by key, then typing on from there: one counter, always the box's length
    page.keyboard.press("1")
    expect(counter).to_have_text(f"{len(ALICE_REV)} of 2,000 characters")
    page.keyboard.press("e")
    page.keyboard.press("End")
    page.keyboard.type(" Today?")
    expect(counter).to_have_text(f"{len(ALICE_REV) + 7} of 2,000 characters")
    assert person.errors == []
