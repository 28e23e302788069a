"""The rubric workspace in a real Chromium, keyboard only: a reviser edits, re-tiers, deletes,
adds, moves and restores checks, sees a stale save refused, and completes the round. Each edit
is answered with only what changed; the page it builds must equal the page drawn afresh."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from rubrics import services
from rubrics.models import CheckEdit, Origin, RubricVersion, Stage
from rubrics.tests.conftest import make_question, sample_meta

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def check(page: Page, check_id: str):
    return page.get_by_test_id(f"check-{check_id}")


# What the checklist shows, tier group by tier group: the checks in order, and the counts.
SHOWN = """() => Array.from(document.querySelectorAll("#checklist .tier-group")).map((group) => [
  group.querySelector(".count").textContent,
  Array.from(group.querySelectorAll("li.check")).map((li) => li.dataset.check)])"""


def order(page: Page, tier: str) -> list[str]:
    return page.locator(f"#checks-{tier} li.check").evaluate_all(
        "(items) => items.map((li) => li.dataset.check)"
    )


def test_revise_a_rubric_with_the_keyboard(dave, log_in, screenshot):
    services.rubric_version_create(
        question=make_question(),
        meta_document=sample_meta(),
        stage=Stage.LLM_REFINED_1,
        made_by_model="fake",
    )
    d = log_in("dave")
    page = d.page
    page.goto("/rubrics/")
    expect(page.get_by_test_id("rubrics-waiting")).to_have_text("1")
    page.get_by_role("button", name="Start the next rubric").click()
    expect(page.get_by_role("heading", name="Meta-rubric")).to_be_visible()
    expect(page.get_by_test_id("count-answer_critical")).to_have_text("5")
    page.evaluate("window.__gamutMarker = 'still-here'")
    answers = []  # every answer to an edit of a check
    page.on("response", lambda r: answers.append(r) if "/checks/" in r.url else None)

    # j to the first check, e to edit, type, Enter saves.
    page.keyboard.press("j")
    expect(check(page, "I1")).to_be_focused()
    page.keyboard.press("e")
    area = check(page, "I1").locator("textarea[name=text]")
    expect(area).to_be_focused()
    area.fill("The response names the dish as beef bourguignon, a Burgundy stew.")
    page.keyboard.press("Enter")
    expect(check(page, "I1").locator(".check-text")).to_have_text(
        "The response names the dish as beef bourguignon, a Burgundy stew."
    )
    expect(check(page, "I1")).to_contain_text("edited by hand")
    expect(check(page, "I1")).to_be_focused()  # the focus comes back after the save

    # j to the next check, 3 re-tiers it to context: the counts follow.
    page.keyboard.press("j")
    expect(check(page, "I2.item1")).to_be_focused()
    page.keyboard.press("3")
    expect(page.get_by_test_id("count-answer_critical")).to_have_text("4")
    expect(page.get_by_test_id("count-context")).to_have_text("3")
    expect(page.get_by_test_id("warnings")).to_contain_text(
        "I2.item1 is context, but its meta item (I2) makes it answer-critical"
    )
    # Into its new group, in its place there (before the context checks that follow it).
    assert order(page, "context") == ["I2.item1", "I4.step3", "I4.seq_all"]
    assert "I2.item1" not in order(page, "answer_critical")
    expect(page.get_by_test_id("diff")).to_contain_text("answer-critical → context")

    expect(check(page, "I2.item1")).to_be_focused()  # the focus follows the moved check

    # x deletes the focused check after its reason.
    check(page, "I2.item2").focus()
    page.keyboard.press("k")
    expect(check(page, "I1")).to_be_focused()
    page.keyboard.press("j")
    expect(check(page, "I2.item2")).to_be_focused()
    page.keyboard.press("x")
    reason = check(page, "I2.item2").locator("input[name=reason]")
    expect(reason).to_be_focused()
    page.keyboard.type("covered by the fact check")
    page.keyboard.press("Enter")
    expect(check(page, "I2.item2")).to_have_count(0)
    expect(page.get_by_test_id("deleted-I2.item2")).to_contain_text("covered by the fact check")
    expect(page.get_by_test_id("warnings")).to_contain_text("strict list is missing red wine")
    expect(page.get_by_test_id("count-answer_critical")).to_have_text("3")
    expect(page.locator("#check-total")).to_have_text("17 checks")

    # a adds a check.
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("a")
    add = page.locator("#add-check textarea[name=text]")
    expect(add).to_be_focused()
    add.fill("The response says the stew is served with boiled potatoes or pasta.")
    page.locator("#add-check select[name=tier]").select_option("context")
    add.focus()
    page.keyboard.press("Enter")
    expect(check(page, "H1")).to_contain_text("boiled potatoes")
    expect(check(page, "H1")).to_contain_text("added by hand")
    assert order(page, "context")[-1] == "H1"
    expect(page.get_by_test_id("count-context")).to_have_text("4")
    expect(add).to_have_value("")  # the add form comes back empty

    # [ moves a check up within its tier; the focus stays on it.
    check(page, "I3.opt2").focus()
    page.keyboard.press("[")
    expect(page.locator("#checks-valuable li.check").first).to_have_attribute(
        "data-check", "I3.opt2"
    )
    assert order(page, "valuable")[:2] == ["I3.opt2", "I3.opt1"]
    expect(check(page, "I3.opt2")).to_be_focused()

    # Restore the deleted check: back in its place, and the strict list is whole again.
    page.locator("#deleted-box summary").click()
    page.get_by_test_id("deleted-I2.item2").get_by_role("button", name="Restore").click()
    expect(check(page, "I2.item2")).to_be_visible()
    assert order(page, "answer_critical") == ["I1", "I2.item2", "I2.item3", "I3.base1"]
    expect(page.get_by_test_id("count-answer_critical")).to_have_text("4")
    expect(page.get_by_test_id("warnings")).not_to_contain_text("strict list is missing")
    expect(page.get_by_test_id("deleted-I2.item2")).to_have_count(0)
    assert page.evaluate("window.__gamutMarker") == "still-here", "an edit reloaded the page"

    # Every edit was answered with a fragment: the changed check at most, never the list.
    bodies = [(r.status, r.text()) for r in answers]
    assert [status for status, _ in bodies] == [200] * 6, bodies
    for _, body in bodies:
        assert 'id="checklist"' not in body and body.count('class="check ') <= 1
        assert len(body) < 12_000, len(body)
    # ... and the page they built is the page drawn afresh.
    built = page.evaluate(SHOWN)
    page.reload()
    assert page.evaluate(SHOWN) == built

    # Someone else saves meanwhile: dave's next save is refused, his typing kept.
    version = RubricVersion.objects.get(stage=Stage.HUMAN_1)
    other = version.checks.get(check_id="I3.base1")
    services.check_edit_text(
        user=dave,
        version_id=version.pk,
        check_pk=other.pk,
        text="Changed in another tab.",
        revision=version.revision,
    )
    check(page, "I1").focus()
    page.keyboard.press("e")
    check(page, "I1").locator("textarea[name=text]").fill("A stale edit.")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("edit-error")).to_contain_text("Someone else changed")
    expect(page.get_by_test_id("edit-error").locator("textarea")).to_have_value("A stale edit.")
    expect(check(page, "I3.base1")).to_contain_text("Changed in another tab.")
    screenshot(page, "workspace")

    # Complete the round.
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_test_id("complete").click()
    expect(page).to_have_url(re.compile(r"/rubrics/$"))
    expect(page.get_by_text("Round complete")).to_be_visible()
    # The browser logs the refused stale save (409) as a failed load; nothing else may fail.
    assert [e for e in d.errors if "409 (Conflict)" not in e] == [], d.errors

    version.refresh_from_db()
    assert version.frozen_at is not None and version.made_by == dave
    rows = {r.check_id: r for r in version.checks.all()}
    assert rows["I1"].origin == Origin.EDITED and rows["I1"].text.startswith("The response")
    assert rows["I2.item1"].tier == "context"
    assert rows["I2.item2"].deleted_at is None and rows["I2.item2"].delete_reason == ""
    assert rows["H1"].tier == "context" and rows["H1"].origin == Origin.ADDED
    assert rows["I3.opt2"].position < rows["I3.opt1"].position
    edits = list(CheckEdit.objects.filter(editor=dave).order_by("id"))
    assert [e.op for e in edits] == [
        "edit",
        "retier",
        "delete",
        "add",
        "move",
        "restore",
        "edit",
        "complete",
    ]
    assert edits[2].after["reason"] == "covered by the fact check"
