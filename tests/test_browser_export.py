"""The Export page in a real Chromium: Export by mouse and by keyboard, the progress while the
background job writes the zip, the page reloading itself with the download link when it is
over, and the download itself. The job's chunk runs in the test's thread, standing in for the
worker."""

from __future__ import annotations

import zipfile

import pytest
from playwright.sync_api import expect

from llm.models import Job
from rubrics.export_jobs import EXPORT
from rubrics.tests.test_hf_export import benchmark  # noqa: F401 (the fixture)
from tests.test_browser_axe import RUN_AXE, axe_source

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("run_here"),
]


def test_export_shows_progress_then_a_download(run_here, benchmark, root, log_in, screenshot):  # noqa: F811
    person = log_in("root")
    page = person.page
    page.goto("/")
    page.get_by_role("link", name="Export", exact=True).click()
    expect(page.get_by_role("heading", name="Export the benchmark")).to_be_visible()
    expect(page.get_by_test_id("export-list")).to_contain_text("No export yet.")
    page.get_by_label("Hugging Face dataset").check()
    page.get_by_role("button", name="Export").click()  # the mouse
    expect(page.get_by_test_id("running")).to_contain_text("Writing the export")
    expect(page.get_by_role("button", name="Export")).to_have_count(0)
    page.evaluate(axe_source())
    assert page.evaluate(RUN_AXE) == []
    job = Job.objects.get(kind=EXPORT)
    run_here(job.pk)
    # The page polls, sees the job over and reloads itself with the download link.
    link = page.get_by_test_id(f"download-{job.pk}")
    expect(link).to_contain_text("gamut-benchmark-hf-", timeout=15_000)
    expect(page.get_by_test_id(f"export-{job.pk}")).to_contain_text("Done: 3 questions")
    screenshot(page, "export")
    page.evaluate(axe_source())
    assert page.evaluate(RUN_AXE) == []
    with page.expect_download() as downloaded:
        link.click()
    download = downloaded.value
    assert download.suggested_filename.startswith("gamut-benchmark-hf-")
    with zipfile.ZipFile(download.path()) as archive:
        names = archive.namelist()
    assert "README.md" in names and "data/test-00000-of-00001.parquet" in names

    # The keyboard: the GAMUT files (the first choice) are checked again after the reload;
    # focus on Export, Enter.
    expect(page.get_by_label("GAMUT files")).to_be_checked()
    page.get_by_role("button", name="Export").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("running")).to_be_visible()
    second = Job.objects.filter(kind=EXPORT).latest("pk")
    assert second.params == {"layout": "gamut", "release": None}
    run_here(second.pk)
    expect(page.get_by_test_id(f"download-{second.pk}")).to_be_visible(timeout=15_000)
    assert person.errors == []
