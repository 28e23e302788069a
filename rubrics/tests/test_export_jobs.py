"""The benchmark export made in the background (rubrics/export_jobs.py): the API and the Export
page start it, nothing is written in the web request, the job writes the zip beside its final
name and renames it into place, and the finished file is handed out to admins only. Each job is
run here by the test (no broker), as a worker would run it."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.conf import settings
from django.db import transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from judging.models import Release
from llm.models import Job, JobStatus
from rubrics import export_jobs
from rubrics.tests.test_import_export import (  # noqa: F401 (fixtures)
    benchmark,
    files_of,
    photo_question,
    run_export,
)

# Every launch's chunk task is dropped and the tests run the jobs here (conftest's run_here).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("run_here")]


def api(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def exports_folder():
    return settings.MEDIA_ROOT / export_jobs.FOLDER


def start(client, **data) -> dict:
    answer = client.post(reverse("api_benchmark_exports"), data, format="json")
    assert answer.status_code == 202, answer.content
    return answer.json()


def test_the_api_exports_in_the_background_and_hands_out_the_same_bytes(
    run_here, tmp_path, benchmark, root
):
    run_export(tmp_path / "export")
    on_disk = files_of(tmp_path / "export")
    client = api(root)
    started = start(client)
    assert started["status"] == "queued" and started["download"] is None
    # Nothing is written in the request: the job writes it.
    assert not exports_folder().exists() or not any(exports_folder().rglob("*.zip"))

    job = run_here(started["job"])
    assert job.status == JobStatus.DONE
    assert job.progress == {"done": 2, "total": 2, "what": "questions"}
    detail = client.get(reverse("api_benchmark_export", args=[job.pk])).json()
    short = json.loads(on_disk["manifest.json"])["content_hash"][len("sha256:") :][:12]
    assert detail["status"] == "done" and detail["questions"] == 2
    assert detail["file_name"] == f"gamut-benchmark-{short}.zip"
    assert detail["content_hash"] == json.loads(on_disk["manifest.json"])["content_hash"]
    assert detail["download"] == reverse("api_benchmark_export_file", args=[job.pk])

    answer = client.get(detail["download"], HTTP_ACCEPT="application/zip")
    assert answer.status_code == 200 and answer["Content-Type"] == "application/zip"
    assert answer["Content-Disposition"] == f'attachment; filename="{detail["file_name"]}"'
    body = b"".join(answer.streaming_content)
    assert len(body) == detail["bytes"]
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        assert archive.namelist() == sorted(on_disk)
        for name in archive.namelist():
            assert archive.read(name) == on_disk[name], name
            assert archive.getinfo(name).date_time == (1980, 1, 1, 0, 0, 0)
    # No partial file is left beside it.
    assert [p.name for p in (exports_folder() / str(job.pk)).iterdir()] == [detail["file_name"]]
    listed = client.get(reverse("api_benchmark_exports")).json()
    assert [row["job"] for row in listed] == [job.pk]


def test_one_export_at_a_time(run_here, benchmark, root):
    client = api(root)
    first = start(client)
    answer = client.post(reverse("api_benchmark_exports"), {}, format="json")
    assert answer.status_code == 409
    assert f"job {first['job']}" in answer.json()["detail"]
    run_here(first["job"])
    start(client)  # once it is over, the next may start


def test_an_export_that_cannot_be_made_says_why_and_leaves_no_file(run_here, benchmark, root):
    benchmark["a1"].rubric.question.image.file.delete(save=False)
    client = api(root)
    job = run_here(start(client)["job"])
    assert job.status == JobStatus.DONE and job.items_failed == 1
    detail = client.get(reverse("api_benchmark_export", args=[job.pk])).json()
    assert "the photo of 'a1' is missing" in detail["error"]
    assert detail["download"] is None
    answer = client.get(reverse("api_benchmark_export_file", args=[job.pk]))
    assert answer.status_code == 409
    assert "the photo of 'a1' is missing" in answer.json()["detail"]
    assert list((exports_folder() / str(job.pk)).iterdir()) == []


def test_a_file_that_is_not_written_yet_is_a_conflict_and_an_unknown_export_404(benchmark, root):
    client = api(root)
    started = start(client)
    answer = client.get(reverse("api_benchmark_export_file", args=[started["job"]]))
    assert answer.status_code == 409 and "not finished" in answer.json()["detail"]
    assert client.get(reverse("api_benchmark_export", args=[999])).status_code == 404
    assert client.get(reverse("api_benchmark_export_file", args=[999])).status_code == 404


def test_the_huggingface_layout_and_bad_requests(run_here, benchmark, root):
    client = api(root)
    bad = client.post(reverse("api_benchmark_exports"), {"layout": "parquet"}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "layout"
    unknown = client.post(reverse("api_benchmark_exports"), {"release": "v9"}, format="json")
    assert unknown.status_code == 404 and "No release is named 'v9'" in unknown.json()["detail"]
    assert not Job.objects.exists()
    job = run_here(start(client, layout="huggingface")["job"])
    detail = client.get(reverse("api_benchmark_export", args=[job.pk])).json()
    assert detail["layout"] == "huggingface"
    assert detail["file_name"].startswith("gamut-benchmark-hf-")
    body = b"".join(client.get(detail["download"]).streaming_content)
    names = zipfile.ZipFile(io.BytesIO(body)).namelist()
    assert "data/test-00000-of-00001.parquet" in names and "README.md" in names


def test_a_release_is_exported_as_it_was_cut(run_here, benchmark, root):
    from judging.releases.services import create_release

    release = create_release("v1.0 (demo)", by=root)
    client = api(root)
    job = run_here(start(client, release=release.name)["job"])
    detail = client.get(reverse("api_benchmark_export", args=[job.pk])).json()
    assert detail["release"] == "v1.0 (demo)"
    assert detail["file_name"].startswith("gamut-benchmark-v1.0__demo_-")
    body = b"".join(client.get(detail["download"]).streaming_content)
    manifest = json.loads(zipfile.ZipFile(io.BytesIO(body)).read("manifest.json"))
    assert manifest["release"]["name"] == "v1.0 (demo)"
    assert Release.objects.count() == 1


def test_a_release_is_published_as_a_static_site(run_here, client, benchmark, root):
    from judging.publish.site import zip_stream
    from judging.releases.services import create_release

    client.force_login(root)
    # No release yet: refused in words, nothing started.
    answer = client.post(reverse("exports"), {"layout": "site", "release": ""}, follow=True)
    assert "No release has been cut yet" in answer.content.decode()
    refused = api(root).post(reverse("api_benchmark_exports"), {"layout": "site"}, format="json")
    assert refused.status_code == 409 and "No release" in refused.json()["detail"]
    assert not Job.objects.exists()

    release = create_release("v1.0", by=root)
    # Left out, the release is the latest one (as the leaderboard page's form sends it).
    client.post(reverse("exports"), {"layout": "site", "release": ""})
    job = run_here(Job.objects.filter(kind=export_jobs.EXPORT).latest("pk").pk)
    detail = api(root).get(reverse("api_benchmark_export", args=[job.pk])).json()
    assert detail["file_name"] == "gamut-v1.0.zip" and detail["release"] == "v1.0"
    assert detail["content_hash"] == release.content_hash and detail["questions"] == 2
    assert job.progress["step"]  # what the writing did last, in words
    body = b"".join(client.get(reverse("export_file", args=[job.pk])).streaming_content)
    assert body == b"".join(zip_stream(release))
    page = client.get(reverse("exports")).content.decode()
    assert "Published leaderboard" in page and "gamut-v1.0.zip" in page


def test_only_admins_export(run_here, benchmark, root, alice, dave):
    started = start(api(root))
    job = run_here(started["job"])
    urls = [
        reverse("api_benchmark_exports"),
        reverse("api_benchmark_export", args=[job.pk]),
        reverse("api_benchmark_export_file", args=[job.pk]),
    ]
    for url in urls:
        assert api().get(url).status_code in (401, 403)
        for person in (alice, dave):
            accept = "application/zip" if url.endswith("/file/") else "application/json"
            answer = api(person).get(url, HTTP_ACCEPT=accept)
            assert answer.status_code == 403, url
            assert answer.json() == {"detail": "Only admins export the benchmark."}
    assert api(alice).post(urls[0], {}, format="json").status_code == 403
    assert Job.objects.count() == 1


def test_the_files_of_the_newest_exports_are_kept(run_here, benchmark, root, monkeypatch):
    monkeypatch.setattr(export_jobs, "KEEP", 2)
    client = api(root)
    done = [run_here(start(client)["job"]).pk for _ in range(3)]
    oldest = client.get(reverse("api_benchmark_export", args=[done[0]])).json()
    assert oldest["removed"] is True and oldest["download"] is None
    assert oldest["content_hash"].startswith("sha256:")
    gone = client.get(reverse("api_benchmark_export_file", args=[done[0]]))
    assert gone.status_code == 410 and "removed to make room" in gone.json()["detail"]
    for pk in done[1:]:
        assert client.get(reverse("api_benchmark_export_file", args=[pk])).status_code == 200


# --- the Export page ------------------------------------------------------------------------


def test_the_page_starts_an_export_shows_its_progress_then_the_download(
    run_here, client, benchmark, root
):
    client.force_login(root)
    page = client.get(reverse("exports"))
    assert page.status_code == 200
    assert b"No export yet." in page.content and b'data-testid="export"' in page.content
    answer = client.post(reverse("exports"), {"layout": "gamut", "release": ""})
    assert answer.status_code == 302 and answer["Location"] == reverse("exports")
    job = Job.objects.get(kind=export_jobs.EXPORT)
    page = client.get(reverse("exports"))
    assert b"Writing the export (job" in page.content
    assert b'data-testid="export"' not in page.content  # no second start while it runs
    poll = client.get(reverse("exports"), HTTP_HX_REQUEST="true")
    assert poll.status_code == 200 and b'id="export-progress"' in poll.content
    run_here(job.pk)
    over = client.get(reverse("exports"), HTTP_HX_REQUEST="true")
    assert over.status_code == 286 and over["HX-Refresh"] == "true"
    page = client.get(reverse("exports"))
    link = reverse("export_file", args=[job.pk])
    assert link.encode() in page.content and b"Done: 2 questions" in page.content
    download = client.get(link)
    assert download.status_code == 200 and download["Content-Type"] == "application/zip"
    assert zipfile.ZipFile(io.BytesIO(b"".join(download.streaming_content))).namelist()


def test_the_page_refuses_a_bad_choice_in_words(client, benchmark, root):
    client.force_login(root)
    answer = client.post(reverse("exports"), {"layout": "gamut", "release": "v9"}, follow=True)
    assert "No release is named &#x27;v9&#x27;." in answer.content.decode()
    answer = client.post(reverse("exports"), {"layout": "csv"}, follow=True)
    assert "Choose what to export" in answer.content.decode()
    assert not Job.objects.exists()


def test_the_page_is_for_admins(client, benchmark, alice, dave):
    for person in (alice, dave):
        client.force_login(person)
        assert client.get(reverse("exports")).status_code == 403
        assert client.post(reverse("exports"), {"layout": "gamut"}).status_code == 403
    assert not Job.objects.exists()


def test_the_page_queries_do_not_grow_with_the_exports(run_here, client, benchmark, root):
    client.force_login(root)
    run_here(start(api(root))["job"])

    def count() -> int:
        with CaptureQueriesContext(transaction.get_connection()) as captured:
            assert client.get(reverse("exports")).status_code == 200
        return len(captured)

    one = count()
    run_here(start(api(root))["job"])
    run_here(start(api(root), layout="huggingface")["job"])
    assert count() == one
    # session and user, roles, the exports with who started them, their items, the releases
    assert one == 6

    # The API (the asker authenticated already): the list and each export, two queries each
    # (the exports with who started them, their items), whatever the number of exports.
    client = api(root)
    jobs = list(Job.objects.values_list("pk", flat=True))
    for url in [reverse("api_benchmark_exports")] + [
        reverse("api_benchmark_export", args=[pk]) for pk in jobs
    ]:
        with CaptureQueriesContext(transaction.get_connection()) as captured:
            assert client.get(url).status_code == 200
        assert len(captured) == 2, (url, [q["sql"] for q in captured])
