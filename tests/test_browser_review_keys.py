"""Nothing lost, nothing sent twice, every key does what it says: the review and adjudication
pages in a real Chromium, driven by the keys a person presses."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import Page, expect

from annotation.models import Adjudication, Candidate, Review
from annotation.review import services

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ANIMAL = "What is this animal?"
ALICE_REV = "What is this animal, and where does it live?"
BOB_REV = "Which animal is this, and what does it eat?"
OWN = "Which animal is this, and how long does it live?"


def question(page: Page):
    return page.get_by_test_id("question")


def decision(page: Page, value: str):
    return page.locator(f'#panel input[name="decision"][value="{value}"]')


def revision(page: Page):
    return page.locator('#panel textarea[name="revised_text"]')


def problem(page: Page):
    return page.get_by_test_id("request-error")


def dispute(make_image, alice, bob, source_id: str, first: str, second: str):
    _, (c,) = make_image(source_id, [ANIMAL])
    services.review_submit(user=alice, candidate_id=c.pk, decision="revise", revised_text=first)
    services.review_submit(user=bob, candidate_id=c.pk, decision="revise", revised_text=second)
    return c


def test_adjudication_r_then_1_as_the_readme_says(make_image, alice, bob, carol, log_in):
    c1 = dispute(make_image, alice, bob, "img-1", ALICE_REV, BOB_REV)
    c2 = dispute(make_image, alice, bob, "img-2", ALICE_REV, BOB_REV)
    c3 = dispute(make_image, alice, bob, "img-3", ALICE_REV, BOB_REV)
    page = log_in("carol").page
    page.goto("/adjudicate/")
    expect(page.get_by_role("button", name="1 Use Annotator 1's revision")).to_be_visible()
    expect(page.get_by_role("button", name="2 Use Annotator 2's revision")).to_be_visible()

    # r, 1, Enter: annotator 1's revision, nothing typed into the box
    page.keyboard.press("r")
    expect(decision(page, "revise")).to_be_checked()
    expect(revision(page)).to_be_visible()
    expect(revision(page)).not_to_be_focused()
    page.keyboard.press("1")
    expect(revision(page)).to_have_value(ALICE_REV)
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text(ALICE_REV)
    assert Adjudication.objects.get(candidate=c1).revised_text == ALICE_REV
    assert Candidate.objects.get(parent=c1).text == ALICE_REV

    # r, 2, Enter: annotator 2's
    expect(page.get_by_test_id("waiting")).to_have_text("2")
    page.keyboard.press("r")
    page.keyboard.press("2")
    expect(revision(page)).to_have_value(BOB_REV)
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("waiting")).to_have_text("1")
    assert Candidate.objects.get(parent=c2).text == BOB_REV

    # her own: r, e (the box takes the focus), type, Enter
    page.keyboard.press("r")
    page.keyboard.press("e")
    expect(revision(page)).to_be_focused()
    page.keyboard.press("Control+a")
    page.keyboard.type(OWN)
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("empty")).to_be_visible()
    assert Candidate.objects.get(parent=c3).text == OWN
    assert not Candidate.objects.filter(text__endswith="?1").exists()


def test_a_failed_save_is_said_in_place_and_retried(make_image, alice, log_in):
    make_image("img-1", ["One?", "Two?", "Three?"])
    person = log_in("alice")
    page = person.page
    page.goto("/review/")
    expect(question(page)).to_be_visible()  # claimed on load (a POST)

    # a 500: said in place, nothing swapped, the keys still work, Retry saves
    page.route("**/review/*/", lambda route: route.fulfill(status=500, body="boom"))
    page.keyboard.press("a")
    page.keyboard.press("c")
    page.keyboard.type("typed before the failure")
    page.keyboard.press("Escape")
    page.keyboard.press("Enter")
    expect(problem(page)).to_contain_text("The server failed (error 500)")
    expect(problem(page)).to_contain_text("What you typed is kept")
    expect(question(page)).to_have_text("One?")
    page.keyboard.press("d")  # keys keep working
    expect(decision(page, "discard")).to_be_checked()
    page.unroute("**/review/*/")
    page.get_by_role("button", name="Retry").click()
    expect(question(page)).to_have_text("Two?")
    expect(problem(page)).to_have_count(0)
    saved = Review.objects.get(annotator__username="alice")
    assert (saved.decision, saved.comment) == ("discard", "typed before the failure")

    # a dropped connection
    page.route("**/review/*/", lambda route: route.abort("connectionreset"))
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    expect(problem(page)).to_contain_text("The connection failed")
    page.unroute("**/review/*/")
    page.keyboard.press("Enter")  # Enter again is a retry too
    expect(question(page)).to_have_text("Three?")
    expect(problem(page)).to_have_count(0)

    # the session ends (logged out in another tab): said, then logged in again there, Retry
    other = person.context.new_page()
    other.goto("/")
    other.get_by_role("button", name="Log out").click()
    expect(other).to_have_url(re.compile(r"/login/"))
    page.keyboard.press("r")
    page.keyboard.press("Control+a")
    page.keyboard.type("Three, and why?")
    page.keyboard.press("Enter")
    expect(problem(page)).to_contain_text("Your session has ended")
    expect(problem(page).get_by_role("link", name="Log in again in a new tab")).to_be_visible()
    expect(revision(page)).to_have_value("Three, and why?")  # kept
    assert page.locator("#panel form#login-form, #panel input[name=password]").count() == 0
    other.get_by_label("User name").fill("alice")
    other.get_by_label("Password").fill("alice-pass")
    other.get_by_label("Password").press("Enter")
    expect(other).to_have_url(re.compile(r"/$"))
    page.get_by_role("button", name="Retry").click()  # the new CSRF token is taken at retry
    expect(page.get_by_test_id("empty")).to_be_visible()
    assert Review.objects.filter(annotator__username="alice").count() == 3
    assert Review.objects.get(candidate__text="Three?").revised_text == "Three, and why?"
    # htmx logs each failed request, and Chromium each failed load: those were made to fail
    induced = ("htmx:", "Failed to load resource", "Response Status Error Code 500")
    assert [e for e in person.errors if not e.startswith(induced)] == []


def test_enter_twice_sends_one_review_and_shows_busy(make_image, alice, log_in):
    """The review is held in the network until both Enters are in: the second is pressed while
    the first is in flight whatever the machine's load (on a loaded one, an answer faster than
    the second key put it on the next question, where "Choose a decision first" is right)."""
    make_image("img-1", ["One?", "Two?"])
    page = log_in("alice").page
    page.goto("/review/")
    expect(question(page)).to_be_visible()  # claimed on load (a POST)
    held = []
    page.route("**/review/*/", lambda route: held.append(route))
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")
    for _ in range(50):
        if held:
            break
        page.wait_for_timeout(100)
    page.wait_for_timeout(300)  # time for a second request, were one sent
    assert len(held) == 1  # one request, however many Enters
    form = page.locator("#review-form")
    expect(form).to_have_class(re.compile(r"htmx-request"))
    expect(form.locator("button[type=submit]")).to_be_disabled()
    expect(form.get_by_test_id("busy")).to_be_visible()
    held[0].continue_()
    expect(question(page)).to_have_text("Two?")
    page.unroute("**/review/*/")
    assert Review.objects.filter(annotator__username="alice").count() == 1
    expect(page.locator(".client-error")).to_have_count(0)


def test_undo_skip_and_the_list_of_today(make_image, alice, bob, log_in):
    _, (c1, c2, c3) = make_image("img-1", ["One?", "Two?", "Three?"])
    page = log_in("alice").page
    page.goto("/review/")
    expect(question(page)).to_be_visible()  # claimed on load (a POST)
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    expect(question(page)).to_have_text("Two?")
    announcer = page.get_by_test_id("announcer")
    expect(announcer).to_have_text("Review saved. Next question: Two?")

    page.keyboard.press("u")  # take it back: One? again, accept still chosen
    expect(question(page)).to_have_text("One?")
    expect(decision(page, "accept")).to_be_checked()
    assert not Review.objects.filter(candidate=c1).exists()
    page.keyboard.press("d")
    page.keyboard.press("Enter")
    expect(question(page)).to_have_text("Two?")
    assert Review.objects.get(candidate=c1).decision == "discard"

    page.keyboard.press("s")  # Two? back to the pool
    expect(question(page)).to_have_text("Three?")
    expect(page.get_by_role("status")).to_have_text("Skipped: the candidate is back in the pool.")
    assert services.review_claim(user=bob).candidate == c1  # bob's turn: his first is One?
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("empty")).to_contain_text("You skipped 1 candidate")

    # bob resolves One?: alice's review of it can no longer change; Three? still can
    services.review_submit(user=bob, candidate_id=c1.pk, decision="discard")
    page.get_by_role("link", name="your reviews of today").click()
    rows = page.get_by_test_id("my-reviews").locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(1)).to_contain_text("resolved: discarded")
    rows.nth(0).get_by_role("button", name="Change").click()
    expect(question(page)).to_have_text("Three?")
    expect(decision(page, "accept")).to_be_checked()
    page.keyboard.press("d")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("empty")).to_be_visible()
    assert Review.objects.get(candidate=c3).decision == "discard"
    assert not Review.objects.filter(candidate=c2).exists()


def test_the_lease_warns_and_then_says_it_ended(make_image, alice, log_in, settings):
    settings.REVIEW_LEASE = timedelta(seconds=3)
    make_image("img-1", ["One?"])
    page = log_in("alice").page
    page.goto("/review/")
    note = page.get_by_test_id("lease-warning")
    expect(note).to_contain_text("Your hold on this candidate ends at")
    expect(note).to_contain_text("ended at", timeout=8000)
    expect(note).to_contain_text("You can still submit")


def test_single_keys_off_comment_key_and_keys_on_buttons(make_image, alice, log_in):
    make_image("img-1", ["One?", "Two?"])
    page = log_in("alice").page
    page.goto("/review/")
    expect(question(page)).to_be_visible()  # claimed on load (a POST)
    page.keyboard.press("c")
    expect(page.get_by_label("Comment")).to_be_focused()
    page.keyboard.type("a comment, not keys: ard")
    page.keyboard.press("Escape")
    expect(decision(page, "accept")).not_to_be_checked()
    # Enter on a focused button presses that button, not the page's Submit
    page.get_by_role("button", name="Keys (?)").focus()
    page.keyboard.press("Enter")
    dialog = page.locator("#keys-help")
    expect(dialog).to_be_visible()
    dialog.get_by_test_id("toggle-single-keys").click()
    expect(page.locator("#panel")).to_have_attribute("data-single-keys", "off")
    page.keyboard.press("a")
    expect(decision(page, "accept")).not_to_be_checked()
    decision(page, "accept").check()
    page.get_by_label("Comment").fill("kept")
    page.get_by_label("Comment").press("Enter")  # Enter still submits
    expect(question(page)).to_have_text("Two?")
    assert Review.objects.get().comment == "kept"


def test_text_fields_count_and_a_cut_paste_is_said(make_image, alice, log_in):
    """The comment box shows its limit (the server's), counts as one types, and a paste longer
    than the room left is cut by the browser with a word saying so, never silently."""
    from core.text import MAX_COMMENT

    make_image("img-1", ["One?"])
    person = log_in("alice")
    page = person.page
    person.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto("/review/")
    expect(question(page)).to_be_visible()
    comment = page.get_by_label("Comment")
    assert comment.get_attribute("maxlength") == str(MAX_COMMENT)
    note = page.locator("#review-form small.limit").last
    expect(note).to_have_text("0 of 5,000 characters")
    comment.focus()
    page.keyboard.type("short")
    expect(note).to_have_text("5 of 5,000 characters")
    page.evaluate("navigator.clipboard.writeText('x'.repeat(20000))")
    page.keyboard.press("Control+V")
    expect(comment).to_have_value("short" + "x" * (MAX_COMMENT - 5))
    expect(note).to_contain_text("the paste held 20,000")
    expect(note).to_contain_text("its last 15,005 did not fit")
    # The revision box has the same limit as the service.
    page.keyboard.press("Escape")
    page.keyboard.press("r")
    revised = page.locator('textarea[name="revised_text"]')
    assert revised.get_attribute("maxlength") == "2000"
