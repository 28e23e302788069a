"""The job console: who may see it, the polled progress partial (286 once the job is over),
cancel and retry through the views, the item page, the prompts page, and pinned query counts.

Jobs are launched with `job_launch` on a kind registered here; their items are moved through the
real claim and record services, synchronously (no worker: the views are what is under test)."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.db import transaction
from django.urls import reverse

from llm import jobs
from llm.models import ItemStatus, Job, JobItem, JobStatus, LedgerEntry
from llm.prompts import all_prompts
from llm.tasks import run_job_chunk

KIND = "test.console"


async def _never_run(gateway: Any, payload: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError("the console tests record outcomes themselves")


@pytest.fixture(autouse=True)
def console_kind() -> Iterator[str]:
    jobs.register_kind(KIND, _never_run, chunk_size=100, concurrency=1)
    yield KIND
    jobs._registry.pop(KIND, None)


@pytest.fixture(autouse=True)
def sent(monkeypatch) -> list[int]:
    """Chunk tasks the services send, caught after the commit instead of reaching a broker."""
    calls: list[int] = []

    def delay_on_commit(job_id: int) -> None:
        transaction.on_commit(lambda: calls.append(job_id))

    monkeypatch.setattr(run_job_chunk, "delay_on_commit", delay_on_commit)
    # A worker's sends (a chunk's successor, the sweep's) are caught too.
    monkeypatch.setattr(
        run_job_chunk,
        "apply_async",
        lambda args, countdown=None, **options: (
            calls.append(args[0]) if countdown is None else None
        ),
    )
    return calls


def launch(n: int = 3, user: Any = None) -> Job:
    return jobs.job_launch(
        kind=KIND, items=[(f"img-{i:03d}", {"n": i}) for i in range(n)], user=user
    )


def finish(job: Job, *, fail: Collection[int] = ()) -> Job:
    """Claim every item and record it: done, or failed with a reason for the indexes in `fail`."""
    claim = jobs.item_claim_chunk(job_id=job.pk)
    assert claim is not None
    for index, item in enumerate(claim.items):
        outcome: Any = (
            jobs.ItemFailed(f"bad output for {item.key}", raw_output="{not json")
            if index in fail
            else jobs.ItemResult({"ok": index}, tokens_in=10, tokens_out=5, cost=Decimal("0.001"))
        )
        jobs.item_record(item_id=item.pk, token=claim.token, outcome=outcome)
    job.refresh_from_db()
    return job


def htmx_get(client, url: str):
    return client.get(url, headers={"HX-Request": "true"})


# --- permissions ----------------------------------------------------------------------------


def _pages(job: Job) -> list[str]:
    item = job.items.order_by("pk").first()
    return [
        reverse("jobs"),
        reverse("job", args=[job.pk]),
        reverse("job_item", args=[job.pk, item.pk]),
        reverse("prompts"),
    ]


@pytest.mark.django_db
def test_anonymous_is_sent_to_login(client, root):
    job = launch(user=root)
    for url in _pages(job):
        response = client.get(url)
        assert response.status_code == 302 and reverse("login") in response["Location"], url
    for name in ("job_cancel", "job_retry"):
        response = client.post(reverse(name, args=[job.pk]))
        assert response.status_code == 302 and reverse("login") in response["Location"]


@pytest.mark.django_db
def test_non_admins_are_refused(client, root, alice, mallory):
    job = finish(launch(user=root), fail={0})
    for person in (alice, mallory):
        client.force_login(person)
        for url in _pages(job):
            assert client.get(url).status_code == 403, (person, url)
        assert htmx_get(client, reverse("job", args=[job.pk])).status_code == 403
        assert client.post(reverse("job_retry", args=[job.pk])).status_code == 403
        assert client.post(reverse("job_cancel", args=[job.pk])).status_code == 403
    job.refresh_from_db()
    assert job.items_failed == 1 and job.status == JobStatus.DONE  # nothing changed


@pytest.mark.django_db
def test_admin_sees_every_page(client, root):
    job = finish(launch(user=root), fail={1})
    client.force_login(root)
    for url in _pages(job):
        assert client.get(url).status_code == 200, url
    assert b'href="/jobs/"' in client.get(reverse("prompts")).content  # the nav link


@pytest.mark.django_db
def test_actions_refuse_get_and_unknown_jobs(client, root):
    client.force_login(root)
    job = launch(user=root)
    assert client.get(reverse("job_cancel", args=[job.pk])).status_code == 405
    assert client.post(reverse("job_cancel", args=[job.pk + 99])).status_code == 404
    assert client.get(reverse("job", args=[job.pk + 99])).status_code == 404
    other = launch(2)
    item = other.items.first()
    assert client.get(reverse("job_item", args=[job.pk, item.pk])).status_code == 404


# --- the list and the job page --------------------------------------------------------------


@pytest.mark.django_db
def test_list_shows_jobs_newest_first_and_the_registered_kinds(client, root):
    first = launch(user=root)
    second = finish(launch(4, user=root), fail={0})
    client.force_login(root)
    html = client.get(reverse("jobs")).content.decode()
    assert html.index(f'data-job="{second.pk}"') < html.index(f'data-job="{first.pk}"')
    assert "3 done" in html and "1 failed" in html and "4 total" in html
    assert "root" in html
    launch_section = html[html.index('data-testid="launch"') :]
    for kind in jobs.registered_kinds():
        assert f"<code>{kind}</code>" in launch_section
    assert 'data-launcher="generate"' in launch_section  # the forms: test_console_launch.py


@pytest.mark.django_db
def test_progress_partial_polls_while_running_and_answers_286_when_over(client, root):
    client.force_login(root)
    job = launch(3, user=root)
    url = reverse("job", args=[job.pk])

    running = htmx_get(client, url)
    assert running.status_code == 200
    body = running.content.decode()
    assert 'hx-trigger="every 2s"' in body and 'id="job-progress"' in body
    assert "<html" not in body  # the partial alone

    finish(job, fail={2})
    over = htmx_get(client, url)
    assert over.status_code == 286
    body = over.content.decode()
    assert "hx-trigger" not in body  # the swapped-in final state polls no more
    assert 'data-count="done">2<' in body and 'data-count="failed">1<' in body
    assert "20" in body  # tokens in: 2 done items x 10

    # The full page of a finished job is an ordinary 200 that does not poll.
    page = client.get(url)
    assert page.status_code == 200 and "hx-trigger" not in page.content.decode()


@pytest.mark.django_db
def test_the_polled_region_is_one_consistent_snapshot_as_items_fail(client, root):
    """Status, counts, failures with their reasons and the items' rows come in the same answer:
    a failure shows while the job runs, and the last answer (286) leaves no item "Running" and
    no green "Done" over failed items."""
    client.force_login(root)
    job = launch(3, user=root)
    url = reverse("job", args=[job.pk])
    claim = jobs.item_claim_chunk(job_id=job.pk)
    first, second, third = claim.items
    jobs.item_record(
        item_id=first.pk,
        token=claim.token,
        outcome=jobs.ItemFailed("the compiler refused: duplicate id I1"),
    )

    body = htmx_get(client, url).content.decode()
    failures = body[body.index('data-testid="failures"') : body.index('data-testid="items"')]
    assert "Failed items (1)" in failures and "duplicate id I1" in failures
    assert reverse("job_item", args=[job.pk, first.pk]) in failures
    assert 'data-count="failed">1<' in body and 'data-count="running">2<' in body
    items = body[body.index('data-testid="items"') :]
    assert items.count("item-running") == 2 and items.count("item-failed") == 1

    jobs.item_record(item_id=second.pk, token=claim.token, outcome=jobs.ItemResult({}))
    jobs.item_record(
        item_id=third.pk, token=claim.token, outcome=jobs.ItemFailed("no grounded evidence")
    )
    over = htmx_get(client, url)
    assert over.status_code == 286
    body = over.content.decode()
    assert "Done, 2 failed" in body and "job-done-failures" in body
    assert 'class="badge job-done"' not in body  # not the green badge
    assert "Failed items (2)" in body and "no grounded evidence" in body
    items = body[body.index('data-testid="items"') :]
    assert "item-running" not in items and items.count("item-failed") == 2


@pytest.mark.django_db
def test_a_job_done_without_failures_is_plain_done(client, root):
    client.force_login(root)
    job = finish(launch(2, user=root))
    body = htmx_get(client, reverse("job", args=[job.pk])).content.decode()
    assert 'class="badge job-done"' in body and "failed</span>" not in body
    assert "Failed items (0)" in body


@pytest.mark.django_db
def test_cancelled_job_stops_polling(client, root):
    client.force_login(root)
    job = launch(3, user=root)
    client.post(reverse("job_cancel", args=[job.pk]))
    assert htmx_get(client, reverse("job", args=[job.pk])).status_code == 286


@pytest.mark.django_db
def test_job_page_lists_failures_with_reasons_and_links(client, root):
    client.force_login(root)
    job = finish(launch(3, user=root), fail={0, 2})
    failed = list(JobItem.objects.filter(job=job, status=ItemStatus.FAILED).order_by("pk"))
    html = client.get(reverse("job", args=[job.pk])).content.decode()
    failures = html[html.index('data-testid="failures"') : html.index('data-testid="items"')]
    for item in failed:
        assert reverse("job_item", args=[job.pk, item.pk]) in failures
        assert f"bad output for {item.key}" in failures
    assert "Retry failed items" in html and ">Cancel<" not in html  # done: nothing to cancel


# --- cancel and retry -----------------------------------------------------------------------


@pytest.mark.django_db
def test_cancel_through_the_view(client, root, sent):
    client.force_login(root)
    job = launch(3, user=root)
    assert ">Cancel<" in client.get(reverse("job", args=[job.pk])).content.decode()
    response = client.post(reverse("job_cancel", args=[job.pk]), follow=True)
    assert response.redirect_chain[-1][0] == reverse("job", args=[job.pk])
    assert "cancelled" in response.content.decode()
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED and job.items_remaining == 0
    assert not JobItem.objects.filter(job=job, status=ItemStatus.PENDING).exists()

    # Cancelling again is refused by the service, and said so, not a crash.
    again = client.post(reverse("job_cancel", args=[job.pk]), follow=True)
    assert "already cancelled" in again.content.decode()


@pytest.mark.django_db
def test_retry_failed_through_the_view(client, root, sent, django_capture_on_commit_callbacks):
    client.force_login(root)
    job = finish(launch(3, user=root), fail={0, 1})
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("job_retry", args=[job.pk]), follow=True)
    assert "2 failed item(s) queued again" in response.content.decode()
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and job.items_failed == 0
    assert job.items_remaining == 2 and job.items_done == 1
    assert JobItem.objects.filter(job=job, status=ItemStatus.PENDING).count() == 2
    assert sent == [job.pk]  # a chunk task went out after the commit
    # Running again: the partial polls again.
    assert htmx_get(client, reverse("job", args=[job.pk])).status_code == 200


@pytest.mark.django_db
def test_retry_of_a_cancelled_job_is_refused_with_a_message(client, root):
    client.force_login(root)
    job = launch(2, user=root)
    jobs.job_cancel(job_id=job.pk)
    response = client.post(reverse("job_retry", args=[job.pk]), follow=True)
    assert "was cancelled" in response.content.decode()


# --- the item page and the prompts page -----------------------------------------------------


@pytest.mark.django_db
def test_item_page_shows_outcome_and_the_jobs_ledger(client, root):
    client.force_login(root)
    job = finish(launch(2, user=root), fail={0})
    item = JobItem.objects.filter(job=job, status=ItemStatus.FAILED).get()
    prompt = next(iter(all_prompts()), None)
    LedgerEntry.objects.create(
        job_id=job.pk,
        stage="generate",
        provider="gemini",
        model="gemini-2.5-flash",
        template_name=prompt.name if prompt else "generate",
        template_version=str(prompt.version) if prompt else "1",
        request_hash="a" * 64,
        outcome="invalid_output",
        tokens_in=123,
        raw_output="x",
    )
    LedgerEntry.objects.create(
        job_id=job.pk + 1,
        stage="elsewhere",
        provider="gemini",
        model="m",
        request_hash="b" * 64,
        outcome="ok",
    )
    html = client.get(reverse("job_item", args=[job.pk, item.pk])).content.decode()
    assert "bad output for img-000" in html and "{not json" in html
    # The payload as fields in words, not a Python dict.
    assert "<dt>N</dt><dd>0</dd>" in html and "&#x27;n&#x27;" not in html
    ledger = html[html.index('data-testid="ledger"') :]
    assert "generate" in ledger and "123" in ledger and "elsewhere" not in ledger
    if prompt:
        assert f"{reverse('prompts')}#{prompt.name}-v{prompt.version}" in ledger


@pytest.mark.django_db
def test_item_page_names_an_unknown_template_without_a_link(client, root):
    client.force_login(root)
    job = finish(launch(1, user=root))
    LedgerEntry.objects.create(
        job_id=job.pk,
        stage="s",
        provider="gemini",
        model="m",
        template_name="no_such_template",
        template_version="7",
        request_hash="c" * 64,
        outcome="ok",
    )
    item = job.items.get()
    html = client.get(reverse("job_item", args=[job.pk, item.pk])).content.decode()
    assert "no_such_template 7" in html and "#no_such_template" not in html


@pytest.mark.django_db
def test_prompts_page_shows_every_version(client, root):
    client.force_login(root)
    html = client.get(reverse("prompts")).content.decode()
    prompts = all_prompts()
    assert html.count('data-testid="prompt"') == len(prompts)
    for prompt in prompts:
        assert f'id="{prompt.name}-v{prompt.version}"' in html and prompt.sha256 in html


# --- query counts ---------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("n", [1, 10])
def test_job_list_query_count_is_constant(client, root, django_assert_num_queries, n):
    for _ in range(n):
        finish(launch(2, user=root), fail={0})
    client.force_login(root)
    # Session, user, their groups, count, page, the domains every stage's filter offers,
    # and for each of the six stages the demo model it would fall back on (none configured;
    # the entity proposals fall back on the generation model's).
    with django_assert_num_queries(12):
        assert client.get(reverse("jobs")).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("n", [1, 10])
def test_job_page_query_count_is_constant(client, root, django_assert_num_queries, n):
    job = finish(launch(n, user=root), fail={0, 3, 5})
    client.force_login(root)
    url = reverse("job", args=[job.pk])
    # Session, user, their groups (the roles the menu needs), job, count and page of items,
    # failures; the polled region the same (it holds the failures and the items too). The
    # job is over, so no count of running or waiting items.
    with django_assert_num_queries(7):
        assert client.get(url).status_code == 200
    with django_assert_num_queries(7):
        assert htmx_get(client, url).status_code == 286


@pytest.mark.django_db
@pytest.mark.parametrize("n", [1, 10])
def test_item_page_query_count_is_constant(client, root, django_assert_max_num_queries, n):
    job = finish(launch(2, user=root))
    for i in range(n):
        LedgerEntry.objects.create(
            job_id=job.pk,
            stage="s",
            provider="gemini",
            model="m",
            request_hash=f"{i:064d}",
            outcome="ok",
        )
    client.force_login(root)
    item = job.items.first()
    with django_assert_max_num_queries(5):
        assert client.get(reverse("job_item", args=[job.pk, item.pk])).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("n", [1, 10])
def test_job_list_query_count_with_models_configured(
    client, root, model, django_assert_num_queries, n
):
    for _ in range(n):
        finish(launch(2, user=root), fail={0})
    client.force_login(root)
    # Session, user, their groups, count, page, the domains, and each stage's model
    # (entity proposals, generation, guard, build and the two refinement rounds: whether it
    # can run).
    with django_assert_num_queries(12):
        assert client.get(reverse("jobs")).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_the_job_page_reads_in_a_transaction_of_its_own(client, root):
    """Outside a test's transaction the page opens its own read snapshot (REPEATABLE READ
    on PostgreSQL, whose SET must come first), and answers as inside one."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    job = finish(launch(3, user=root), fail={1})
    client.force_login(root)
    with CaptureQueriesContext(connection) as queries:
        page = htmx_get(client, reverse("job", args=[job.pk]))
    assert page.status_code == 286 and "Done, 1 failed" in page.content.decode()
    isolation = [q["sql"] for q in queries.captured_queries if "ISOLATION" in q["sql"]]
    assert len(isolation) == (1 if connection.vendor == "postgresql" else 0)
