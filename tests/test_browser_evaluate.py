"""Evaluate the demo's live model on the demo release from the judging runs page, in a real
Chromium: the form's estimate (htmx), the launch, the run's page polling until the result
shows, and axe-core on both pages. The jobs run in a thread standing in for the worker."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from llm.demo import DEMO_EVALUATED_MODEL, DEMO_JUDGE
from llm.models import Job
from tests.test_browser_axe import RUN_AXE, axe_source
from tests.test_demo_evaluate import RELEASE, judged_by_the_worker, worker  # noqa: F401
from tests.test_demo_pipeline import demo  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_evaluate_the_demo_model_from_the_runs_page(worker, root, log_in, screenshot):  # noqa: F811
    judged_by_the_worker("judge", "--judge", DEMO_JUDGE)  # the live judge scores the release
    page = log_in("root").page
    page.goto("/judging/runs/")
    form = page.get_by_test_id("evaluate")
    form.get_by_label("Evaluated model").select_option(DEMO_EVALUATED_MODEL)
    form.get_by_label("Release").select_option(RELEASE)
    form.get_by_role("button", name="Estimate").click()
    estimate = page.get_by_test_id("evaluate-estimate")
    expect(estimate.locator('[data-field="items"]')).to_have_text("2")
    expect(page.get_by_test_id("evaluate-steps")).to_contain_text("demo-judge-llm")
    expect(page.get_by_test_id("evaluate-steps").locator(".badge.demo").first).to_be_visible()
    source = axe_source()
    page.evaluate(source)
    assert page.evaluate(RUN_AXE) == []
    assert not Job.objects.filter(kind="judging.evaluate").exists()

    page.get_by_role("button", name="Launch 2 item(s)").click()
    expect(page).to_have_url(re.compile(r"/judging/runs/evaluate/\d+/$"))
    result = page.get_by_test_id("evaluation-result")
    expect(result.locator('[data-field="rank"]').first).to_have_text(
        re.compile(r"\d of 3"), timeout=30_000
    )  # the page polled until the run was over
    expect(page.get_by_test_id("job-status")).to_have_text("Done")
    expect(result.locator("[data-neighbour]").first).to_contain_text("demo-model-")
    screenshot(page, "evaluate-result")
    page.evaluate(source)
    assert page.evaluate(RUN_AXE) == []
