"""Spot checks in a real Chromium, keyboard only: a reviser grades two spot checks on which
the judges disagree, without ever seeing the judges' verdicts."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from judging.models import EvaluatedModel, Judge, Response, SpotCheck
from judging.spot_checks.services import spot_checks_draw
from judging.tests.conftest import final_checks, make_question
from judging.verdicts.services import verdict_record

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_grade_spot_checks_with_the_keyboard(dave, root, log_in, screenshot):
    a, b = Judge.objects.create(name="judge-a"), Judge.objects.create(name="judge-b")
    model = EvaluatedModel.objects.create(name="model-a")
    question = make_question("q1")
    response = Response.objects.create(
        model=model,
        question=question,
        setting="text_only",
        text="It is beef bourguignon, a stew from Burgundy.",
    )
    for check, (va, vb) in zip(
        final_checks(question),
        [("meets", "missing"), ("contradicts", "meets"), ("meets", "meets")],
        strict=True,
    ):
        verdict_record(judge=a, response=response, check=check, verdict=va, rationale="A-SAYS")
        verdict_record(judge=b, response=response, check=check, verdict=vb, rationale="B-SAYS")
    assert spot_checks_draw(count=5, user=root, seed=3) == 2

    page = log_in("dave").page
    page.goto("/judging/spot-checks/")
    expect(page.get_by_test_id("left")).to_have_text("2")
    expect(page.get_by_test_id("response")).to_contain_text("beef bourguignon")
    assert "A-SAYS" not in page.content() and "judge-a" not in page.content()
    page.keyboard.press("?")
    expect(page.locator("#keys-help")).to_be_visible()
    page.keyboard.press("Escape")
    first = page.get_by_test_id("check").inner_text()
    screenshot(page, "spot-check")
    page.keyboard.press("3")  # missing
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("left")).to_have_text("1")
    expect(page.get_by_test_id("check")).not_to_have_text(first)
    page.keyboard.press("1")  # meets
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("empty")).to_be_visible()

    grades = dict(SpotCheck.objects.values_list("check_row__text", "verdict"))
    assert grades[first] == "missing"
    assert sorted(grades.values()) == ["meets", "missing"]
    assert set(SpotCheck.objects.values_list("graded_by__username", flat=True)) == {"dave"}


def test_an_audit_pair_is_graded_twice_with_the_keyboard_by_two_people(
    dave, root, log_in, screenshot
):
    """The random audit on the same page and keys: dave grades an audit pair that is to be
    graded twice; root, the second grader, is told so, sees neither the judge's verdict nor
    dave's grade or note, and grades it with the keyboard too."""
    from judging.spot_checks.audit import audit_draw

    judge = Judge.objects.create(name="judge-a")
    model = EvaluatedModel.objects.create(name="model-a")
    question = make_question("q1", tiers=("answer_critical",))
    response = Response.objects.create(
        model=model, question=question, setting="text_only", text="It is beef bourguignon."
    )
    (check,) = final_checks(question)
    verdict_record(judge=judge, response=response, check=check, verdict="meets", rationale="A")
    assert audit_draw(count=1, double_share=1, user=root, seed=1) == 1

    page = log_in("dave").page
    page.goto("/judging/spot-checks/")
    expect(page.get_by_test_id("spot-check")).to_be_visible()
    expect(page.get_by_test_id("second")).to_have_count(0)
    page.get_by_label("Note (optional)").fill("DAVE-NOTE")
    page.get_by_test_id("response").click()  # leave the note field: keys grade again
    page.keyboard.press("4")  # contradicts
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("empty")).to_be_visible()  # never his own pair again

    second = log_in("root").page
    second.goto("/judging/spot-checks/")
    expect(second.get_by_test_id("second")).to_be_visible()
    assert "DAVE-NOTE" not in second.content() and "checked" not in second.content()
    screenshot(second, "audit-second-grade")
    second.keyboard.press("3")  # missing
    second.keyboard.press("Enter")
    expect(second.get_by_test_id("empty")).to_be_visible()
    spot = SpotCheck.objects.get()
    assert (spot.verdict, spot.second_verdict) == ("contradicts", "missing")
    assert (spot.graded_by.username, spot.second_graded_by.username) == ("dave", "root")
