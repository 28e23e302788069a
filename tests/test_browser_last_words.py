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


def test_a_text_over_every_limit_is_refused_above_the_form_and_kept(make_image, alice, log_in):
    """The input boundary's refusal (a field over 20,000 characters, as a browser that ignores
    maxlength sends it) is said above the form in the page's words, naming the field by its
    label; the panel is not replaced, the text stays, and Retry sends the shortened form."""
    make_image("img-1", ["One?", "Two?"])
    person = log_in("alice")
    page = person.page
    page.goto("/review/")
    expect(page.get_by_test_id("question")).to_have_text("One?")
    comment = page.get_by_label("Comment")
    comment.evaluate("field => field.removeAttribute('maxlength')")
    page.keyboard.press("a")
    comment.fill("y" * 20_001)
    comment.press("Enter")
    problem = page.get_by_test_id("request-error")
    expect(problem).to_contain_text(
        "Not saved: A text you sent is longer than 20,000 characters (20,001 sent): shorten it."
        " It is in “Comment”, selected below. What you typed is kept on this page."
    )
    expect(page.get_by_test_id("question")).to_have_text("One?")
    expect(comment).to_have_value("y" * 20_001)
    expect(comment).to_be_focused()
    expect(comment).to_have_attribute("aria-invalid", "true")
    assert not Review.objects.exists()

    comment.fill("fine after all")
    expect(comment).not_to_have_attribute("aria-invalid", "true")
    page.get_by_role("button", name="Retry").click()
    expect(page.get_by_test_id("question")).to_have_text("Two?")
    expect(problem).to_have_count(0)
    assert Review.objects.get().comment == "fine after all"
    # The browser logs the refused request itself; the page's script raised nothing.
    assert [e for e in person.errors if "status of 400" not in e] == []


def paste(box, text: str) -> None:
    """The text put into the box at once, as a paste does (fill types a long multi-line text
    far more slowly), with the input event a paste sends."""
    box.evaluate(
        "(field, text) => { field.value = text;"
        " field.dispatchEvent(new Event('input', {bubbles: true})); }",
        text,
    )


def test_the_jobs_ids_box_counts_and_refuses_in_words(make_image, root, log_in):
    make_image("img-1", [])
    person = log_in("root")
    page = person.page
    page.goto("/jobs/")
    card = page.locator("#launch-generate")
    box = card.locator('textarea[name="ids"]')
    note = card.locator('textarea[name="ids"] + small.limit')
    expect(note).to_have_text("0 of 10,000 characters")
    box.click()
    page.keyboard.type("img-1\nimg-2")
    expect(note).to_have_text("11 of 10,000 characters")

    # Past its own limit (a browser that ignores maxlength): the server's words in the estimate.
    box.evaluate("field => field.removeAttribute('maxlength')")
    card.get_by_role("radio", name="Chosen images").check()
    paste(box, "img-1\n" * 1667)
    expect(note).to_have_text("10,002 of 10,000 characters")
    card.get_by_role("button", name="Estimate").click()
    expect(card.get_by_test_id("estimate-error")).to_have_text(
        "The source ids are longer than 10,000 characters (10,002 sent): shorten them."
    )
    expect(box).to_have_value("img-1\n" * 1667)

    # Past every field's limit: the boundary's words above the form, naming the box.
    paste(box, "img-1\n" * 3334)
    card.get_by_role("button", name="Estimate").click()
    expect(card.get_by_test_id("request-error")).to_contain_text(
        "Not saved: A text you sent is longer than 20,000 characters (20,004 sent): shorten it."
        " It is in “Source ids”, selected below."
    )
    expect(box).to_be_focused()
    expect(box).to_have_value("img-1\n" * 3334)
    assert [e for e in person.errors if "status of 400" not in e] == []


def test_the_release_forms_fields_count_and_keep_a_refused_text(root, log_in):
    person = log_in("root")
    page = person.page
    page.goto("/releases/")
    name = page.get_by_label("Name")
    notes = page.get_by_label("Notes")
    assert name.get_attribute("maxlength") == "40"
    assert notes.get_attribute("maxlength") == "2000"
    name_note = page.locator('input[name="name"] + small.limit')
    notes_note = page.locator('textarea[name="notes"] + small.limit')
    expect(name_note).to_have_text("0 of 40 characters")
    expect(notes_note).to_have_text("0 of 2,000 characters")
    name.click()
    page.keyboard.type("v1.0")
    expect(name_note).to_have_text("4 of 40 characters")
    notes.click()
    page.keyboard.type("The first cut")
    expect(notes_note).to_have_text("13 of 2,000 characters")

    # A longer name than the field takes (maxlength ignored): said beside it, all kept.
    name.evaluate("field => field.removeAttribute('maxlength')")
    name.fill("v" * 41)
    page.get_by_role("button", name="Cut the release").click()
    expect(page.locator(".errorlist")).to_have_text(
        "The name is longer than 40 characters (41 sent): shorten it."
    )
    expect(page.get_by_label("Name")).to_have_value("v" * 41)
    expect(page.get_by_label("Notes")).to_have_value("The first cut")
    expect(page.locator('input[name="name"] + small.limit')).to_have_text("41 of 40 characters")
    assert [e for e in person.errors if "status of 400" not in e] == []
