"""The job console: admins watch jobs, cancel them, retry their failures, read each item's
outcome and the ledger rows of its job, and read every prompt template.

Each view checks the role, calls at most one service, renders. The job page's progress region
is a partial that htmx polls; it answers 286 once the job is over, which tells htmx to stop.
Cancel and retry are plain forms (post-redirect-get), so the console works without JavaScript.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Page, Paginator
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from core import access
from core.errors import InvalidInput, Unavailable
from core.text import MAX_SOURCE_IDS, clean_text

from . import jobs, launchers
from .models import ItemStatus, Job, JobItem, JobStatus, LedgerEntry
from .prompts import all_prompts

JOBS_PER_PAGE = 50
ITEMS_PER_PAGE = 50
FAILURES_SHOWN = 100
LEDGER_ROWS_SHOWN = 200
# htmx stops polling an element whose request is answered with this status.
STOP_POLLING = 286


def _page(request: HttpRequest, items: Any, per_page: int) -> Page:
    # get_page never raises: a bad or out-of-range ?page= shows the first or last page.
    return Paginator(items, per_page).get_page(request.GET.get("page"))


def _is_over(job: Job) -> bool:
    return job.status in jobs.OVER


def _prompt_anchor(name: str, version: str) -> str:
    """The id of a template's version on the prompts page (ledger rows may say "3" or "v3")."""
    return f"{name}-v{version.removeprefix('v')}"


# --- pages --------------------------------------------------------------------------------


@access.role_required(access.ADMIN)
@require_GET
def job_list(request: HttpRequest) -> HttpResponse:
    # The counters live on the job row, so one query serves the page whatever its size.
    return render(request, "llm/jobs.html", _jobs_context(request))


def _jobs_context(request: HttpRequest, est: dict[str, Any] | None = None) -> dict[str, Any]:
    page = _page(request, Job.objects.select_related("launched_by"), JOBS_PER_PAGE)
    return {
        "page": page,
        "kinds": jobs.registered_kinds(),
        "launchers": _launch_forms(),
        "est": est,
    }


def _launch_forms() -> list[dict[str, Any]]:
    """Each launcher with the domains its filter offers; launchers sharing a domains function
    (every stage filters by the images' domain) share its one query."""
    asked: dict[Any, list[str]] = {}
    forms = []
    for launcher in launchers.all_launchers():
        if launcher.domains is not None and launcher.domains not in asked:
            asked[launcher.domains] = launchers.domain_choices(launcher)
        forms.append(
            {
                "launcher": launcher,
                "has_domains": launcher.domains is not None,
                "domains": asked.get(launcher.domains, []),
                "no_model": _no_model(launcher),
            }
        )
    return forms


def _no_model(launcher: launchers.Launcher) -> str:
    """Why the stage cannot run yet, and what to set (e.g. the demo, which configures no
    model): said above its form, not only once an estimate is asked for. "" when it can."""
    try:
        launcher.model()
    except jobs.JobError as exc:
        return str(exc)
    return ""


def _job_context(request: HttpRequest, job_id: int) -> dict[str, Any]:
    """Everything the job's polled region shows (status, counts, failures with their reasons,
    the page of items) read from one snapshot, so no part of it is older than another."""
    with jobs.one_snapshot():
        job = get_object_or_404(Job.objects.select_related("launched_by"), pk=job_id)
        items = (
            JobItem.objects.filter(job=job)
            .order_by("pk")
            .only("pk", "job_id", "key", "status", "attempts", "last_error", "finished_at")
        )
        page = _page(request, items, ITEMS_PER_PAGE)
        page.object_list = list(page.object_list)  # read now, inside the snapshot
        failures = (
            list(
                items.filter(status=ItemStatus.FAILED).order_by("-finished_at", "-pk")[
                    :FAILURES_SHOWN
                ]
            )
            if job.items_failed
            else []
        )
        # job_progress's own failure list has no item ids to link to: the page lists them.
        progress = jobs.job_progress(job, failures=0)
    over = _is_over(job)
    return {
        "job": job,
        "progress": progress,
        "over": over,
        "can_cancel": not over,
        "failures": failures,
        "items": page,
        "with_failures": job.status == JobStatus.DONE and job.items_failed > 0,
        "now": timezone.now(),
        "sweep_seconds": settings.LLM_JOB_SWEEP_SECONDS,
        "can_retry": job.status != JobStatus.CANCELLED
        and (job.items_failed > 0 or job.status == JobStatus.WAITING_FOR_QUOTA),
    }


@access.role_required(access.ADMIN)
@require_GET
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    context = _job_context(request, job_id)
    if request.htmx:
        # The polled partial: its last answer carries 286 so htmx swaps it in and stops.
        return render(
            request,
            "llm/job.html#progress",
            context,
            status=STOP_POLLING if context["over"] else 200,
        )
    return render(request, "llm/job.html", context)


@access.role_required(access.ADMIN)
@require_GET
def job_item(request: HttpRequest, job_id: int, item_id: int) -> HttpResponse:
    item = get_object_or_404(JobItem.objects.select_related("job"), pk=item_id, job_id=job_id)
    known = {(p.name, p.version) for p in all_prompts()}
    # The item's calls; rows written before the ledger knew items (no key) are shown with them.
    ledger = list(
        LedgerEntry.objects.filter(Q(item_key=item.key) | Q(item_key=""), job_id=job_id).order_by(
            "created_at", "pk"
        )[:LEDGER_ROWS_SHOWN]
    )
    for row in ledger:
        version = row.template_version.removeprefix("v")
        row.prompt_anchor = (
            _prompt_anchor(row.template_name, row.template_version)
            if version.isdigit() and (row.template_name, int(version)) in known
            else ""
        )
    return render(
        request,
        "llm/item.html",
        {
            "job": item.job,
            "item": item,
            "item_title": jobs.item_title(item.job.kind, item.key),
            "ledger": ledger,
            "ledger_cap": LEDGER_ROWS_SHOWN,
        },
    )


@access.role_required(access.ADMIN)
@require_GET
def prompt_list(request: HttpRequest) -> HttpResponse:
    prompts = [
        {"prompt": p, "anchor": _prompt_anchor(p.name, str(p.version))} for p in all_prompts()
    ]
    return render(request, "llm/prompts.html", {"prompts": prompts})


# --- actions ------------------------------------------------------------------------------


@access.role_required(access.ADMIN)
@require_POST
def job_cancel(request: HttpRequest, job_id: int) -> HttpResponse:
    job = get_object_or_404(Job, pk=job_id)
    try:
        jobs.job_cancel(job_id=job.pk)
    except jobs.JobError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, f"Job {job.pk} cancelled: running items finish, pending ones will not start."
        )
    return redirect("job", job_id=job.pk)


@access.role_required(access.ADMIN)
@require_POST
def job_retry(request: HttpRequest, job_id: int) -> HttpResponse:
    job = get_object_or_404(Job, pk=job_id)
    try:
        retried = jobs.job_retry_failed(job_id=job.pk)
    except jobs.JobError as exc:
        messages.error(request, str(exc))
    except Unavailable as exc:
        messages.error(request, exc.message)
        return redirect("job", job_id=job.pk)
    else:
        messages.success(request, f"Job {job.pk}: {retried} failed item(s) queued again.")
    return redirect("job", job_id=job.pk)


# --- launching ----------------------------------------------------------------------------


def _launcher(request: HttpRequest) -> launchers.Launcher:
    launcher = launchers.get_launcher(request.POST.get("launcher", ""))
    if launcher is None:
        raise Http404("There is no such job to launch.")
    return launcher


def _scope(
    request: HttpRequest, launcher: launchers.Launcher
) -> tuple[launchers.Scope | None, str]:
    """The scope the form asks for, or None and why it is refused."""
    if request.POST.get("scope", "all") == "chosen":
        try:
            clean_text(
                request.POST.get("ids", ""),
                "ids",
                limit=MAX_SOURCE_IDS,
                label="The source ids",
                plural=True,
                strip=False,
            )
        except InvalidInput as exc:
            return None, exc.message
    scope = launchers.scope_from(
        launcher,
        scope=request.POST.get("scope", "all"),
        ids_text=request.POST.get("ids", ""),
        domain=request.POST.get("domain", ""),
        state=request.POST.get("state", ""),
    )
    error = launchers.scope_error(launcher, scope)
    return (None, error) if error else (scope, "")


def _estimate(request: HttpRequest, launcher: launchers.Launcher) -> dict[str, Any]:
    est: dict[str, Any] = {
        "launcher": launcher,
        "scope": request.POST.get("scope", "all"),
        "ids": request.POST.get("ids", ""),
        "domain": request.POST.get("domain", ""),
        "state": request.POST.get("state", ""),
        "error": "",
        "estimate": None,
        "skipped": 0,
        "matched": 0,
    }
    scope, est["error"] = _scope(request, launcher)
    if scope is None:
        return est
    try:
        est["estimate"], est["matched"], est["skipped"] = launchers.scope_estimate(launcher, scope)
    except jobs.JobError as exc:
        est["error"] = str(exc)
    return est


@access.role_required(access.ADMIN)
@require_POST
def job_estimate(request: HttpRequest) -> HttpResponse:
    """The calls, tokens and cost of a launch, with its Launch button (htmx: the partial)."""
    est = _estimate(request, _launcher(request))
    if request.htmx:
        return render(request, "llm/jobs.html#estimate", {"est": est})
    return render(request, "llm/jobs.html", _jobs_context(request, est))


@access.role_required(access.ADMIN)
@require_POST
def job_launch(request: HttpRequest) -> HttpResponse:
    launcher = _launcher(request)
    scope, error = _scope(request, launcher)
    fresh = request.POST.get("fresh", "")
    if fresh not in ("", "1", "on"):
        scope, error = None, f"fresh: expected a checkbox (1 or nothing), not {fresh[:40]!r}."
    if scope is None:
        messages.error(request, error)
        return redirect("jobs")
    try:
        job = launcher.launch(user=request.user, ids=scope.ids, fresh=bool(fresh))
    except jobs.JobError as exc:
        messages.error(request, str(exc))
        return redirect("jobs")
    except Unavailable as exc:
        # Rolled back: the console again, saying why, with the status a script can read.
        messages.error(request, exc.message)
        return render(request, "llm/jobs.html", _jobs_context(request), status=exc.status)
    messages.success(
        request, f"{launcher.label}: job {job.pk} launched with {job.items_total} item(s)."
    )
    return redirect("job", job_id=job.pk)
