"""Spot checks in a real Chromium, keyboard only: a reviser grades two spot checks on which
the judges disagree, without ever seeing the judges' verdicts."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from judging.models import EvaluatedModel, Judge, Response, SpotCheck
from judging.services import verdict_record
from judging.spot_checks import spot_checks_draw
from judging.tests.conftest import final_checks, make_question

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
