"""Pages a person can find and read, in a real Chromium with the keys a person presses: the
error pages, the images list from the pipeline's counts, the menu, the zoomed photo, the
import's progress and the review screens at 768 px."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from annotation.review import services
from tests.test_browser_axe import RUN_AXE, axe_source

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_error_pages_and_the_images_list_by_keyboard(make_image, alice, bob, root, log_in):
    make_image("cat-001", [], entity="Tabby cat", domain="animals")
    _, (c,) = make_image(
        "coffee-002", ["What is the foam pattern called?"], entity="Cappuccino", domain="food"
    )
    _, (accepted,) = make_image(
        "rocket-003", ["Which rocket is this?"], entity="Falcon 9", domain="vehicles"
    )
    services.review_submit(user=alice, candidate_id=accepted.pk, decision="accept")
    services.review_submit(user=bob, candidate_id=accepted.pk, decision="accept")

    a = log_in("alice")
    page = a.page
    # A GET on a POST-only address explains itself and leads on, with the menu.
    response = page.goto(f"/review/{c.pk}/")
    assert response.status == 405
    expect(page.get_by_role("heading", name="This address is not a page to visit")).to_be_visible()
    expect(page.get_by_role("navigation", name="Main").get_by_role("link")).to_have_text(
        ["Review", "My work"]
    )
    page.get_by_role("link", name="Go to /review/").click()
    expect(page).to_have_url(re.compile(r"/review/$"))
    expect(page.get_by_role("link", name="Review", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    # A page for someone else says whose it is.
    assert page.goto("/pipeline/").status == 403
    expect(page.get_by_test_id("error-message")).to_have_text("This page is for admins.")

    r = log_in("root")
    page = r.page
    page.goto("/pipeline/")
    page.get_by_test_id("image-counts").get_by_role("link", name="Awaiting the guard").click()
    expect(page).to_have_url(re.compile(r"/images/\?state=awaiting_guard$"))
    expect(page.get_by_role("link", name="Images")).to_have_attribute("aria-current", "page")
    expect(page.get_by_test_id("image-list").locator("tbody tr")).to_have_count(1)
    expect(page.get_by_label("State")).to_have_value("awaiting_guard")
    # Search with the keyboard: type, Enter; then follow the row to the image's page.
    page.get_by_label("State").select_option("")
    page.get_by_label("Search").fill("cappuccino")
    page.get_by_label("Search").press("Enter")
    expect(page.get_by_test_id("image-total")).to_have_text("1")
    link = page.get_by_role("link", name="coffee-002")
    link.focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/images/coffee-002/$"))
    expect(page.get_by_role("heading", name="coffee-002")).to_be_visible()
    # An address that names nothing: the page above it, one Enter away.
    assert page.goto("/images/no-such-image/").status == 404
    page.get_by_role("link", name="Go up to /images/").press("Enter")
    expect(page).to_have_url(re.compile(r"/images/$"))
    # The only errors the console saw are the refusals this test asked for.
    for person in (a, r):
        assert [e for e in person.errors if "status of 40" not in e] == []


def test_the_photo_zooms_to_the_screen_pans_and_esc_closes(make_image, alice, log_in):
    make_image("img-1", ["What is this?"])
    page = log_in("alice").page
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto("/review/")
    expect(page.get_by_test_id("question")).to_be_visible()  # claimed on load (a POST)
    page.keyboard.press("z")
    overlay = page.locator("#photo-zoom")
    expect(overlay).to_be_visible()
    big = overlay.locator("img")
    box = big.bounding_box()
    assert (box["width"], box["height"]) == (1280, 900)  # the whole screen, not 451 px
    assert big.evaluate("img => getComputedStyle(img).objectFit") == "contain"
    page.keyboard.press("+")
    page.keyboard.press("+")
    expect(overlay).to_have_attribute("data-scale", "1.56")
    page.keyboard.press("ArrowLeft")
    assert "translate(60px" in big.evaluate("img => img.style.transform")
    # The page's own keys do nothing while the photo is open: "a" chose no decision.
    page.keyboard.press("a")
    expect(page.locator('#panel input[name="decision"][value="accept"]')).not_to_be_checked()
    page.keyboard.press("0")
    expect(overlay).to_have_attribute("data-scale", "1.00")
    page.evaluate(axe_source())  # the open photo is a page of its own for axe
    assert page.evaluate(RUN_AXE) == []
    page.keyboard.press("Escape")
    expect(overlay).to_be_hidden()
    page.keyboard.press("a")  # and the keys work again
    expect(page.locator('#panel input[name="decision"][value="accept"]')).to_be_checked()


def test_at_768_px_the_reviews_stay_side_by_side_and_submit_is_in_view(
    make_image, alice, bob, carol, root, log_in
):
    _, (c,) = make_image("img-1", ["What is this dish and how is it made?"])
    services.review_submit(user=alice, candidate_id=c.pk, decision="accept")
    services.review_submit(
        user=bob,
        candidate_id=c.pk,
        decision="revise",
        revised_text="What is this dish, and how is it cooked?",
    )
    make_image("img-2", ["Which region is it from?"])
    for username, url in (("alice", "/review/"), ("carol", "/adjudicate/"), ("root", "/pipeline/")):
        page = log_in(username).page
        page.set_viewport_size({"width": 768, "height": 1024})
        page.goto(url)
        assert page.evaluate("document.documentElement.scrollWidth") <= 768, url
        logout = page.get_by_role("button", name="Log out")
        expect(logout).to_be_in_viewport()
        for link in page.get_by_role("navigation", name="Main").get_by_role("link").all():
            expect(link).to_be_in_viewport()
        if url != "/pipeline/":
            expect(page.locator("#panel").get_by_role("button", name="Submit")).to_be_in_viewport()
    page = log_in("carol").page
    page.set_viewport_size({"width": 768, "height": 1024})
    page.goto("/adjudicate/")
    first, second = (page.get_by_test_id(f"review-{n}").bounding_box() for n in (1, 2))
    assert first["y"] == second["y"] and second["x"] > first["x"] + first["width"] - 1


def test_import_shows_progress_resets_on_failure_and_refreshes_the_list(root, log_in, tmp_path):
    page = log_in("root").page
    page.goto("/import/")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        '{"source_id": "s1", "image": "s1.png", "entity": "Cat", '
        '"domain": "animals", "popularity": "head"}\n'
    )
    page.get_by_label("Manifest").set_input_files(str(manifest))
    page.get_by_role("button", name="Import").click()
    expect(page.get_by_test_id("problems")).to_have_text(
        "No zip was uploaded, and the manifest names images: choose the zip of the images as well."
    )
    expect(page.locator("#upload-progress")).to_be_hidden()  # reset, not stuck at 100%
    expect(page.get_by_test_id("recent-imports")).to_contain_text("None yet.")


def test_an_upload_over_the_import_caps_says_why_and_that_retrying_will_not_help(
    root, log_in, tmp_path, settings
):
    """The server refuses it by its size, unread (core.middleware.RequestSizeMiddleware);
    the page says what the limit is, not "press Retry"."""
    settings.IMPORT_MAX_TOTAL_BYTES = settings.IMPORT_MAX_MANIFEST_BYTES = 0
    page = log_in("root").page
    page.goto("/import/")
    manifest = tmp_path / "m.jsonl"
    manifest.write_bytes(b"\n" * (17 * 1024 * 1024))
    page.get_by_label("Manifest").set_input_files(str(manifest))
    page.get_by_role("button", name="Import").click()
    expect(page.locator(".request-error")).to_contain_text(
        "Too large to send, so nothing was saved: The upload is 17.0 MB, over the 16.0 MB "
        "this import takes (IMPORT_MAX_TOTAL_BYTES + IMPORT_MAX_MANIFEST_BYTES); split it "
        "into smaller imports. It was refused unread. Retrying the same files will be "
        "refused again."
    )
