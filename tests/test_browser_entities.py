"""Confirming proposed entities in a real Chromium with the keys the page names: y confirms,
c opens the correction box (Enter saves it), s skips; and the candidates of a confirmed image
then reach review."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.images.crag_mm import DATASET
from annotation.models import AuditEvent, Image, ImportBatch
from tests.test_browser_axe import RUN_AXE, axe_source

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def proposals(make_image):
    batch = ImportBatch.objects.create(source="command", file_name="crag", dataset=DATASET)
    made = []
    for n, (entity, query) in enumerate(
        [
            ("Citroën 2CV", "what car is this?"),
            ("Renault 5", "how old is this car?"),
            ("Fiat 500", "where was this car made?"),
        ],
        start=1,
    ):
        image, _ = make_image(
            f"s-{n}",
            ["What car is this, and why did so many people buy one?"],
            entity=entity,
            domain="vehicles",
            popularity="torso",
            entity_confirmed=False,
            import_batch=batch,
            source_query=query,
            source_answer=f"It is a {entity}.",
        )
        made.append(image)
    return made


def test_y_confirms_c_corrects_with_enter_s_skips(proposals, alice, log_in):
    first, second, third = proposals
    page = log_in("alice").page
    page.goto("/review/")
    expect(page.get_by_test_id("empty")).to_be_visible()  # their candidates wait
    page.goto("/")
    expect(page.get_by_test_id("home-entities")).to_have_text("3")
    page.get_by_role("link", name="Confirm entities").click()
    proposed = page.get_by_test_id("proposed-entity")
    expect(proposed).to_have_text("Citroën 2CV")
    expect(page.get_by_test_id("source-query")).to_have_text("what car is this?")
    box = page.locator('#panel input[name="entity"]')
    expect(box).to_be_hidden()  # until c
    page.evaluate(axe_source())
    assert page.evaluate(RUN_AXE) == []  # no critical or serious accessibility violation

    page.keyboard.press("y")
    expect(page.get_by_test_id("notice")).to_have_text("Confirmed: Citroën 2CV.")
    expect(proposed).to_have_text("Renault 5")
    first.refresh_from_db()
    assert first.entity_confirmed
    event = AuditEvent.objects.get(image=first, action="entity.confirm")
    assert event.actor == alice

    page.keyboard.press("c")
    expect(box).to_be_visible()
    # A busy machine may prepare the new panel (htmx:load) after the first key pressed on it:
    # the box that c opened stays open.
    page.evaluate("htmx.trigger(document.querySelector('[data-shortcuts]'), 'htmx:load')")
    expect(box).to_be_visible()
    expect(box).to_be_focused()
    page.keyboard.type("Renault 4")  # the proposal is selected: typing replaces it
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("notice")).to_have_text("Corrected to Renault 4.")
    expect(proposed).to_have_text("Fiat 500")
    second.refresh_from_db()
    assert (second.entity, second.entity_confirmed) == ("Renault 4", True)

    page.keyboard.press("s")
    expect(page.get_by_test_id("empty")).to_be_visible()
    third.refresh_from_db()
    assert not third.entity_confirmed
    assert Image.objects.entity_proposed().count() == 1

    # The confirmed images' candidates are offered for review now.
    page.goto("/review/")
    expect(page.get_by_test_id("question")).to_be_visible()


def test_mouse_corrects_with_single_keys_off(proposals, alice, log_in):
    """With single-key shortcuts off, c is only a letter: the visible Correct button opens the
    box, and the correction saves with the mouse alone."""
    from annotation.home.preferences import preference_set

    first = proposals[0]
    preference_set(user=alice, single_key_shortcuts=False)
    page = log_in("alice").page
    page.goto("/entities/")
    expect(page.get_by_test_id("proposed-entity")).to_have_text("Citroën 2CV")
    box = page.locator('#panel input[name="entity"]')
    expect(box).to_be_hidden()
    page.keyboard.press("c")
    expect(box).to_be_hidden()  # single keys are off
    page.get_by_role("button", name="Correct c").click()
    expect(box).to_be_visible()
    expect(box).to_be_focused()
    expect(page.get_by_role("button", name="Correct c")).to_be_hidden()
    box.fill("Citroën DS")
    page.get_by_role("button", name="Save the correction").click()
    expect(page.get_by_test_id("notice")).to_have_text("Corrected to Citroën DS.")
    first.refresh_from_db()
    assert (first.entity, first.entity_confirmed) == ("Citroën DS", True)
    # The next image offers the Correct button again.
    expect(page.get_by_role("button", name="Correct c")).to_be_visible()
