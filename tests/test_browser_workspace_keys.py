"""The rubric workspace's keys in a real Chromium: Enter and Space press the focused button,
arrows change a focused select, page shortcuts leave buttons, selects and fields alone, the focus
goes to the neighbouring check after a delete or an add, and "Complete this round" has a key."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from rubrics import services
from rubrics.models import RubricVersion, Stage
from rubrics.tests.conftest import make_question, sample_meta

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def check(page: Page, check_id: str):
    return page.get_by_test_id(f"check-{check_id}")


def open_workspace(log_in) -> Page:
    services.rubric_version_create(
        question=make_question(),
        meta_document=sample_meta(),
        stage=Stage.LLM_REFINED_1,
        made_by_model="fake",
    )
    page = log_in("dave").page
    page.goto("/rubrics/")
    page.get_by_role("button", name="Start the next rubric").click()
    expect(page.get_by_role("heading", name="Meta-rubric")).to_be_visible()
    return page


def wait_for(page: Page, condition, timeout_ms: int = 5000) -> None:
    """Playwright reports dialogs as events, let in while it talks to the browser: poll for the
    one expected."""
    for _ in range(timeout_ms // 20):
        if condition():
            return
        page.wait_for_timeout(20)


def edit_forms_open(page: Page) -> int:
    return page.locator("#checklist li.check .edit-text:not([hidden])").count()


def test_buttons_and_selects_keep_their_keys(dave, log_in):
    page = open_workspace(log_in)
    dialogs: list[str] = []

    def dismiss(dialog):
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)

    # Enter on "Complete this round": its confirmation, not the editor of the last check
    check(page, "I1").focus()
    complete = page.get_by_test_id("complete")
    complete.focus()
    page.keyboard.press("Enter")
    wait_for(page, lambda: dialogs)
    assert edit_forms_open(page) == 0
    expect(complete).to_be_focused()

    # Space on a tier button re-tiers that check
    check(page, "I1").focus()  # its buttons show while the check has the focus
    button = check(page, "I1").get_by_role("button", name="3 Context")
    button.focus()
    page.keyboard.press(" ")
    expect(page.get_by_test_id("count-context")).to_have_text("3")
    assert edit_forms_open(page) == 0

    # j on a button is no shortcut: the focus stays on the button
    check(page, "I3.opt2").focus()
    move = check(page, "I3.opt2").locator("[data-move=up]")
    move.focus()
    page.keyboard.press("j")
    expect(move).to_be_focused()

    # arrows on a select change the select, not the focused check
    tier = page.locator("#add-check select[name=tier]")
    tier.focus()
    page.keyboard.press("ArrowDown")
    expect(tier).to_have_value("valuable")
    expect(tier).to_be_focused()

    # Enter on Add adds (with text typed), and the focus goes to the new check
    page.locator("#add-check textarea[name=text]").fill("The response mentions the wine.")
    add = page.locator("#add-check").get_by_role("button", name="Add")
    add.focus()
    page.keyboard.press("Enter")
    expect(check(page, "H1")).to_be_visible()
    expect(check(page, "H1")).to_be_focused()
    assert edit_forms_open(page) == 0

    # after a delete, the neighbouring check has the focus, not the page
    ids = page.locator("#checklist li.check").evaluate_all(
        "(items) => items.map((li) => li.dataset.check)"
    )
    victim = ids[1]
    check(page, victim).focus()
    page.keyboard.press("x")
    # Enter with no reason: the field says it is needed, nothing is sent
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    reason = check(page, victim).locator("input[name=reason]")
    page.keyboard.press("Enter")
    expect(reason).to_be_focused()
    assert reason.evaluate("(input) => input.validity.valueMissing")
    page.wait_for_timeout(300)
    assert posts == [] and edit_forms_open(page) == 0
    expect(check(page, victim)).to_have_count(1)
    page.keyboard.type("a duplicate")
    page.keyboard.press("Enter")
    expect(check(page, victim)).to_have_count(0)
    expect(check(page, ids[2])).to_be_focused()

    # "Complete this round" has a key: c asks for the confirmation
    page.keyboard.press("c")
    wait_for(page, lambda: len(dialogs) == 2)
    assert len(dialogs) == 2 and all("Complete this round?" in m for m in dialogs), dialogs
    assert RubricVersion.objects.get(stage=Stage.HUMAN_1).frozen_at is None


def test_a_failed_edit_is_said_in_place_and_retry_presses_the_same_button(dave, log_in):
    page = open_workspace(log_in)
    # The connection drops for the first re-tier: the check says so, and keeps its tier.
    dropped: list[str] = []

    def drop(route):
        dropped.append(route.request.url)
        route.abort()

    page.route("**/checks/*/tier/", drop)
    check(page, "I1").focus()
    page.keyboard.press("3")
    problem = check(page, "I1").get_by_test_id("request-error")
    expect(problem).to_contain_text("The connection failed")
    assert len(dropped) == 1
    expect(page.get_by_test_id("count-context")).to_have_text("2")
    # The keys still work, and Retry sends the same re-tier (the button, not the form's
    # default action, which saves the text).
    page.unroute("**/checks/*/tier/")
    problem.get_by_role("button", name="Retry").click()
    expect(page.get_by_test_id("count-context")).to_have_text("3")
    expect(page.get_by_test_id("request-error")).to_have_count(0)
    version = RubricVersion.objects.get(stage=Stage.HUMAN_1)
    assert [e.op for e in version.edits.order_by("id")] == ["retier"]


def test_a_focus_moved_while_a_save_settles_stays_where_the_person_put_it(dave, log_in):
    """htmx settles a swap 20 ms after it (longer on a busy machine): a person who has moved on
    to another check's button by then keeps the focus there."""
    page = open_workspace(log_in)
    page.evaluate("() => { htmx.config.defaultSettleDelay = 800; }")
    check(page, "I1").focus()
    button = check(page, "I1").get_by_role("button", name="3 Context")
    button.focus()
    page.keyboard.press(" ")
    expect(page.get_by_test_id("count-context")).to_have_text("3")
    check(page, "I3.opt2").focus()
    move = check(page, "I3.opt2").locator("[data-move=up]")
    move.focus()
    page.wait_for_timeout(1200)  # past the settle
    expect(move).to_be_focused()
    # a focus that the swap took away (the pressed button is replaced) still comes back, to the
    # check that was saved
    check(page, "I1").focus()
    button = check(page, "I1").get_by_role("button", name="1 Answer-critical")
    button.focus()
    page.keyboard.press(" ")
    expect(page.get_by_test_id("count-context")).to_have_text("2")
    page.wait_for_timeout(1200)
    expect(check(page, "I1")).to_be_focused()
    # An added check takes the focus only from the add form: a person who has gone on to another
    # check before the add settled keeps their place, and the key they pressed there applies
    # to that check (CI, 2026-12-04: the new check took the focus back).
    page.keyboard.press("a")
    page.keyboard.type("The response says the stew is served with boiled potatoes.")
    page.keyboard.press("Enter")
    expect(check(page, "H1")).to_be_visible()
    check(page, "I3.opt2").focus()
    page.keyboard.press("[")
    page.wait_for_timeout(1200)  # past the add's settle
    expect(page.locator("#checks-valuable li.check").first).to_have_attribute(
        "data-check", "I3.opt2"
    )
    page.wait_for_timeout(1200)  # past the move's settle
    expect(check(page, "I3.opt2")).to_be_focused()
    # ... and the add form still hands the focus to the check it added.
    page.keyboard.press("a")
    page.keyboard.type("The response names Burgundy.")
    page.keyboard.press("Enter")
    page.wait_for_timeout(1200)
    expect(check(page, "H2")).to_be_focused()


def tier_order(page: Page, tier: str) -> list[str]:
    return page.locator(f"#checks-{tier} li.check").evaluate_all(
        "els => els.map(e => e.dataset.check)"
    )


def test_quick_keys_wait_for_the_save_in_flight_and_apply_in_order(dave, log_in):
    """Keys pressed faster than the saves answer: `]` three times, `2` twice, Enter twice in an
    edit. Each takes effect, in order; nothing is refused as stale, nothing fails on the page.
    A real conflict (another tab saved) is said on the page."""
    page = open_workspace(log_in)
    person_errors = []
    page.on("pageerror", lambda exc: person_errors.append(str(exc)))
    statuses: list[int] = []
    page.on(
        "response",
        lambda r: statuses.append(r.status) if "/checks/" in r.url else None,
    )
    before = tier_order(page, "answer_critical")
    first = before[0]
    check(page, first).focus()
    for _ in range(3):
        page.keyboard.press("]")
    expected = [*before[1:4], first, *before[4:]]
    expect(page.locator("#checks-answer_critical li.check").nth(3)).to_have_attribute(
        "data-check", first
    )
    wait_for(page, lambda: len(statuses) >= 3)
    assert tier_order(page, "answer_critical") == expected
    expect(check(page, first)).to_be_focused()

    page.keyboard.press("2")
    page.keyboard.press("2")
    expect(page.locator(f"#checks-valuable [data-check='{first}']")).to_have_count(1)
    page.keyboard.press("e")
    area = check(page, first).locator("textarea[name=text]")
    expect(area).to_be_focused()
    area.fill("The response names the dish's region of origin.")
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")
    expect(check(page, first).locator(".check-text")).to_have_text(
        "The response names the dish's region of origin."
    )
    page.wait_for_timeout(300)
    assert 409 not in statuses, statuses
    expect(page.get_by_test_id("edit-error")).to_have_count(0)
    assert person_errors == []

    # Someone else saves meanwhile: the next key is refused, and the page says so.
    version = RubricVersion.objects.get(stage=Stage.HUMAN_1)
    services.check_edit_text(
        user=dave,
        version_id=version.pk,
        check_pk=version.checks.get(check_id=before[1]).pk,
        text="Changed in another tab.",
        revision=version.revision,
    )
    check(page, first).focus()
    page.keyboard.press("[")
    page.keyboard.press("[")
    expect(page.get_by_test_id("edit-error")).to_contain_text("Someone else changed")
    expect(check(page, before[1])).to_contain_text("Changed in another tab.")
    assert person_errors == []


def test_the_mouse_edits_a_check_with_its_edit_button(dave, log_in):
    """What e does, a visible Edit button does: the box opens, Save saves."""
    page = open_workspace(log_in)
    first = tier_order(page, "answer_critical")[0]
    check(page, first).hover()
    check(page, first).get_by_role("button", name="Edit e").click()
    area = check(page, first).locator("textarea[name=text]")
    expect(area).to_be_visible()
    expect(area).to_be_focused()
    area.fill("The response says where the dish comes from.")
    check(page, first).get_by_role("button", name="Save Enter").click()
    expect(check(page, first).locator(".check-text")).to_have_text(
        "The response says where the dish comes from."
    )
