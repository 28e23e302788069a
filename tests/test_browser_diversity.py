"""The question-diversity page in a real Chromium: Recompute by mouse and by keyboard, the
progress while the background job runs, and the page reloading itself with the stored report
when it is over. The job's chunk runs in the test's thread, standing in for the worker."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.analysis.diversity_jobs import DIVERSITY
from annotation.models import FinalQuestion
from llm.models import Job
from tests.test_browser_axe import RUN_AXE, axe_source

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("run_here"),
]


@pytest.fixture
def questions(make_image):
    texts = [
        ("d-1", "Vespa", "What is this Vespa, and how fast does it go?"),
        ("d-2", "Unimog", "What is this Unimog, and how fast does it go?"),
        ("d-3", "Ramen", "Who invented this broth, and where did it spread?"),
    ]
    for source_id, entity, text in texts:
        image, (candidate,) = make_image(source_id, [text], entity=entity)
        FinalQuestion.objects.create(image=image, candidate=candidate, text=text, method="manual")


def test_recompute_shows_progress_then_the_report(run_here, questions, root, log_in, screenshot):
    person = log_in("root")
    page = person.page
    page.goto("/diversity/")
    expect(page.get_by_test_id("not-computed")).to_be_visible()
    page.get_by_role("button", name="Recompute").click()  # the mouse
    running = page.get_by_test_id("running")
    expect(running).to_contain_text("0 of 2 parts done")
    expect(page.get_by_role("button", name="Recompute")).to_have_count(0)
    page.evaluate(axe_source())
    assert page.evaluate(RUN_AXE) == []
    run_here(Job.objects.get(kind=DIVERSITY))
    # The page polls, sees the job over and reloads itself with the report.
    expect(page.get_by_test_id("templates-final")).to_have_text("2 templates", timeout=15_000)
    expect(page.get_by_test_id("computed-at")).to_contain_text("started by root")
    expect(page.get_by_test_id("largest-final")).to_contain_text(
        "what is this <entity> and how fast does it go"
    )
    screenshot(page, "diversity")
    page.evaluate(axe_source())
    assert page.evaluate(RUN_AXE) == []

    # The keyboard: focus on Recompute, Enter.
    button = page.get_by_role("button", name="Recompute")
    button.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("running")).to_be_visible()
    assert Job.objects.filter(kind=DIVERSITY).count() == 2
    run_here(Job.objects.filter(kind=DIVERSITY).latest("pk"))
    expect(page.get_by_test_id("recompute")).to_be_visible(timeout=15_000)
    expect(page.get_by_test_id("templates-candidates")).to_have_text("2 templates")
    assert person.errors == []
