"""The rubric revision workspace: a queue of rubrics waiting for a human round, and the page
where a reviser edits the binary checklist beside its meta-rubric.

Each check is one form whose buttons post each to their own address (hx-post per button). Every
edit is one POST carrying the version's `revision`. An htmx edit is answered with what it
changed: the check itself, put where it now belongs, the regions that depend on it (tier counts,
warnings, diff, deleted checks), and the new revision, which one out-of-band element puts into
every form's revision field; a refused edit is answered with the whole checklist as it stands
(409 when the revision was stale), what the person typed kept. Plain posts get
post-redirect-get.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.db.models import Count, Q
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from annotation.home.preferences import single_keys
from annotation.models import RoundAudit
from core import access
from core.errors import DomainError, Unavailable
from core.http import refuse
from judging.checks.report import check_report
from judging.models import Judge, Setting
from judging.releases.selectors import release_named, releases
from llm.views import STOP_POLLING

from . import export_jobs, services
from .compiler import TIERS
from .exporting import ExportError
from .models import RevisionClaim, Rubric, RubricCheck, RubricVersion

TIER_LABELS = {"answer_critical": "Answer-critical", "valuable": "Valuable", "context": "Context"}
TYPE_ORDER = [
    ("fact", "Facts"),
    ("strict_list", "Strict lists"),
    ("flexible_list", "Flexible lists"),
    ("process", "Processes"),
    ("relationship", "Relationships"),
]


@access.role_required(access.RUBRIC_REVISER)
def queue(request: HttpRequest) -> HttpResponse:
    held = (
        RevisionClaim.objects.filter(reviser=request.user, version__frozen_at__isnull=True)
        .select_related("version__rubric__question__image")
        .first()
    )
    waiting = services.waiting_versions(now=timezone.now()).count()
    return render(
        request,
        "rubrics/queue.html",
        {
            "held": held,
            "waiting": waiting,
            "done": RubricVersion.objects.filter(
                made_by=request.user, frozen_at__isnull=False
            ).count(),
        },
    )


@access.role_required(access.RUBRIC_REVISER, access.ADMIN)
def history(request: HttpRequest, rubric_id: int) -> HttpResponse:
    """A rubric's versions, and the difference between any two of them (?a=ID&b=ID)."""
    rubric = get_object_or_404(Rubric.objects.select_related("question__image"), pk=rubric_id)
    versions = list(
        rubric.versions.select_related("made_by")
        .annotate(n_checks=Count("checks", filter=Q(checks__deleted_at__isnull=True)))
        .order_by("id")
    )
    for v in versions:
        v.human_round = human_change_rows(v.human_changes)
    by_id = {str(v.pk): v for v in versions}
    old = by_id.get(request.GET.get("a", ""))
    new = by_id.get(request.GET.get("b", ""))
    if old is None and new is None and len(versions) >= 2:
        old, new = versions[-2], versions[-1]
    diff = None
    if old is not None and new is not None:
        rows = {v.pk: list(v.checks.all()) for v in (old, new)}
        diff = services.version_diff(rows[old.pk], rows[new.pk])
    # What the results say of this rubric's final checks (judging/checks/info.py), under the
    # first judge in the multimodal setting, when there is one.
    judge = Judge.objects.order_by("name").first()
    flagged = check_report(judge, Setting.MULTIMODAL, rubric_id=rubric.pk) if judge else None
    return render(
        request,
        "rubrics/history.html",
        {
            # Second revisers' audits of its rounds (annotation/training/audits.py): flags first.
            "audits": RoundAudit.objects.filter(version__rubric=rubric)
            .exclude(verdict="")
            .select_related("version", "auditor", "reviser")
            .order_by("-verdict", "-audited_at"),
            "flagged": flagged,
            "rubric": rubric,
            "versions": versions,
            "old": old,
            "new": new,
            "diff": diff,
        },
    )


@access.role_required(access.RUBRIC_REVISER)
@require_POST
def claim(request: HttpRequest) -> HttpResponse:
    version = services.revision_claim(user=request.user)
    if version is None:
        messages.info(request, "No rubric is waiting for a human round.")
        return redirect("rubrics_queue")
    return redirect("rubric_workspace", version_id=version.pk)


def _version(version_id: int, *, page: bool = False) -> RubricVersion:
    """The version as the edits' services read it (with its parent); for the page with its
    question and image as well."""
    versions = services.drafts()
    if page:
        versions = versions.select_related("rubric__question__image")
    version = versions.filter(pk=version_id).first()
    if version is None:
        raise Http404(f"There is no rubric version {version_id}.")
    return version


def _in_order(version_id: int):
    return RubricCheck.objects.filter(version_id=version_id).order_by("position", "pk")


def _scaffold(meta: dict) -> list[tuple[str, list[dict]]]:
    """The meta-rubric's items grouped by type, each with its snippets looked up."""
    snippets = {s["id"]: s for s in meta.get("snippets", [])}
    groups: dict[str, list[dict]] = {key: [] for key, _ in TYPE_ORDER}
    for item in meta.get("items", []):
        shown = dict(item)
        # "items" would read as dict.items in a template: members go under their own key.
        shown["members"] = item.get("items", [])
        shown["evidence"] = [snippets[s] for s in item.get("snippets", []) if s in snippets]
        shown["insights"] = [
            {**mi, "evidence": [snippets[s] for s in mi.get("snippets", []) if s in snippets]}
            for mi in item.get("meta_insights", []) or []
        ]
        groups.setdefault(item["type"], []).append(shown)
    return [(label, groups[key]) for key, label in TYPE_ORDER if groups.get(key)]


# The regions of the checklist besides the check itself that an edit of each kind can change:
# a move changes no count, warning or difference (none of them looks at positions), a new text
# only the difference (the warnings look at tiers, sources and deletions, never at texts). An
# edit's answer computes and sends only these, and a move does not read the parent's checks.
REGIONS = frozenset({"counts", "warnings", "diff"})
EDIT_REGIONS = {
    "text": frozenset({"diff"}),
    "retier": REGIONS,
    "move": frozenset(),
    "delete": REGIONS,
    "restore": REGIONS,
    "add": REGIONS,
}


def _checklist_context(
    version: RubricVersion,
    *,
    changed: RubricCheck | None = None,
    regions: frozenset[str] = REGIONS,
    error: DomainError | None = None,
    attempted: dict | None = None,
) -> dict:
    """Everything the checklist shows. Read after the version, so the rows are at least as new
    as the revision that the page will carry. After an edit, `changed` is the check as the edit
    left it, standing in its place among the rows read, and the only check drawn; the warnings
    and the diff are computed only when among `regions`."""
    rows = list(_in_order(version.pk))
    drawn = rows
    if changed is not None:
        rows = [changed if r.pk == changed.pk else r for r in rows]
        drawn = [changed]
    diff = None
    if version.parent_id and "diff" in regions:
        # The diff compares ids, texts, tiers and deletions: the parent's rows without the rest.
        parent_rows = _in_order(version.parent_id).only("check_id", "text", "tier", "deleted_at")
        diff = services.version_diff(list(parent_rows), rows)
    live = [r for r in rows if r.deleted_at is None]
    meta = version.meta_rubric
    snippets = {s["id"]: s for s in meta.get("snippets", [])}
    carried = _carried(services.human_round_outcome(version))
    for row in drawn:
        row.carries = carried.get(row.check_id, ())
        row.evidence = [snippets[s] for s in row.snippets if s in snippets]
    groups = []
    for tier in TIERS:
        checks = [r for r in live if r.tier == tier]
        groups.append(
            {"tier": tier, "label": TIER_LABELS[tier], "checks": checks, "count": len(checks)}
        )
    return {
        "version": version,
        "revision": version.revision,
        # One address for the whole list, each check's own made from it in the template.
        "checks_url": reverse("rubric_workspace", args=[version.pk]) + "checks/",
        "editable": version.frozen_at is None,
        "rows": rows,
        "groups": groups,
        "deleted": [r for r in rows if r.deleted_at is not None],
        "total": len(live),
        "warnings": services.rubric_warnings(meta, rows) if "warnings" in regions else [],
        "diff": diff,
        "parent_stage": version.parent.get_stage_display() if version.parent_id else "",
        "regions": regions,
        "tiers": [(n, tier, TIER_LABELS[tier]) for n, tier in enumerate(TIERS, start=1)],
        "sources": sorted(services.meta_ids(meta)),
        "error": error,
        "attempted": attempted or {},
    }


# What a human change was, in words, by its kind (rubrics/human_changes.py).
CHANGE_WORDS = {"add": "addition", "edit": "edit", "retier": "re-tier", "delete": "deletion"}


def _carried(outcome: list[dict] | None) -> dict[str, list[str]]:
    """The checks that carry a change of the human round, each with what it carries, in
    words: {check id: ["the reviser's edit (h1)", ...]}."""
    carried: dict[str, list[str]] = {}
    for change in outcome or []:
        if change["outcome"] == "carried":
            for check_id in change["checks"]:
                said = f"the reviser's {CHANGE_WORDS[change['op']]} ({change['id']})"
                carried.setdefault(check_id, []).append(said)
    return carried


def human_change_rows(outcome: list[dict] | None) -> dict | None:
    """The outcome of a human round's changes for a page: the dropped ones first (what the
    LLM dropped, with its reasons), then those carried; None when there is nothing to say."""
    if outcome is None:
        return None
    rows = [{**change, "what": CHANGE_WORDS[change["op"]]} for change in outcome]
    return {
        "dropped": [r for r in rows if r["outcome"] == "dropped"],
        "carried": [r for r in rows if r["outcome"] == "carried"],
        "total": len(rows),
    }


@access.role_required(access.RUBRIC_REVISER, access.ADMIN)
def workspace(request: HttpRequest, version_id: int) -> HttpResponse:
    """Revisers edit here; admins may look (read-only)."""
    reviser = access.is_reviser(request.user)
    version = _version(version_id, page=True)
    context = _checklist_context(version)
    context["human_round"] = human_change_rows(services.human_round_outcome(version))
    context["editable"] = context["editable"] and reviser
    context["question"] = version.rubric.question
    context["scaffold"] = _scaffold(version.meta_rubric)
    context["single_keys"] = single_keys(request.user)
    return render(request, "rubrics/workspace.html", context)


def _placement(rows: list[RubricCheck], row: RubricCheck) -> str:
    """Where a live check goes in the page (an hx-swap-oob value): before the next live check of
    its tier, or at the end of its tier's list."""
    later = rows[rows.index(row) + 1 :]
    following = next((r for r in later if r.deleted_at is None and r.tier == row.tier), None)
    if following is None:
        return f"beforeend:#checks-{row.tier}"
    return f"beforebegin:#check-{following.pk}"


def _edit(
    request: HttpRequest, version_id: int, action: Callable[..., RubricCheck], kind: str, **fields
) -> HttpResponse:
    """Run one edit service; answer with the changed check and the regions that depend on it,
    or with the current state and the refusal (409 for a stale page), what the person typed
    kept. `kind` says how the edit changes the page: "text" changes a check in place,
    "retier" and "move" may move it to another place or tier group, "delete" takes it out,
    "restore" and "add" put one in; EDIT_REGIONS, which regions it changes besides."""
    try:
        changed = action(
            user=request.user,
            version_id=version_id,
            revision=request.POST.get("revision"),
            **fields,
        )
    except DomainError as exc:

        def checklist(exc: DomainError) -> HttpResponse:
            context = _checklist_context(
                _version(version_id),
                error=exc,
                attempted={
                    "action": action.__name__,
                    **{k: v for k, v in fields.items() if isinstance(v, str)},
                },
            )
            # Out of band, not HX-Retarget: htmx resolves a re-target from the element that
            # sent the request, and a check's button is gone once an earlier save moved it.
            context["checklist_oob"] = True
            return render(request, "rubrics/workspace.html#checklist", context, status=exc.status)

        return refuse(
            request,
            exc,
            partial=checklist,
            redirect_to=reverse("rubric_workspace", args=[version_id]),
        )
    if not request.htmx:
        return redirect("rubric_workspace", version_id=version_id)
    # The draft as the edit left it (the service's, with its parent's stage): not read again.
    context = _checklist_context(changed.version, changed=changed, regions=EDIT_REGIONS[kind])
    # The revision this edit produced, as the service says, not the version's as read now: if
    # another tab saved in between, the page has not seen that save, and its next save must be
    # refused with the whole current state.
    context["revision"] = changed.revision
    rows, row = context["rows"], changed
    live = row.deleted_at is None
    shown_before = live if kind in ("text", "retier", "move") else kind == "delete"
    context.update(
        {
            "check": row,
            "check_oob": kind == "text" and live,
            "remove": shown_before and kind != "text",
            "place": _placement(rows, row) if live and kind != "text" else "",
            "show_deleted": not live or kind == "restore",
            "deleted_open": kind == "restore",
            "show_add": kind == "add",
        }
    )
    return render(request, "rubrics/workspace.html#edit", context)


@access.role_required(access.RUBRIC_REVISER)
@require_POST
def check_text(request: HttpRequest, version_id: int, check_pk: int) -> HttpResponse:
    return _edit(
        request,
        version_id,
        services.check_edit_text,
        "text",
        check_pk=check_pk,
        text=request.POST.get("text", ""),
    )


@access.role_required(access.RUBRIC_REVISER)
@require_POST
def check_tier(request: HttpRequest, version_id: int, check_pk: int) -> HttpResponse:
    return _edit(
        request,
        version_id,
        services.check_retier,
        "retier",
        check_pk=check_pk,
        tier=request.POST.get("tier", ""),
    )


@access.role_required(access.RUBRIC_REVISER)
@require_POST
def check_delete(request: HttpRequest, version_id: int, check_pk: int) -> HttpResponse:
    return _edit(
        request,
        version_id,
        services.check_delete,
        "delete",
        check_pk=check_pk,
        reason=request.POST.get("reason", ""),
    )


@access.role_required(access.RUBRIC_REVISER)
@require_POST
def check_restore(request: HttpRequest, version_id: int, check_pk: int) -> HttpResponse:
    return _edit(request, version_id, services.check_restore, "restore", check_pk=check_pk)


@access.role_required(access.RUBRIC_REVISER)
@require_POST
def check_move(request: HttpRequest, version_id: int, check_pk: int) -> HttpResponse:
    """Up or down within its tier group (the service finds the neighbour)."""
    return _edit(
        request,
        version_id,
        services.check_move,
        "move",
        check_pk=check_pk,
        direction=request.POST.get("direction", ""),
    )


@access.role_required(access.RUBRIC_REVISER)
@require_POST
def check_add(request: HttpRequest, version_id: int) -> HttpResponse:
    return _edit(
        request,
        version_id,
        services.check_add,
        "add",
        text=request.POST.get("text", ""),
        tier=request.POST.get("tier", ""),
        source=request.POST.get("source", ""),
        after_check_pk=request.POST.get("after") or None,
    )


@access.role_required(access.RUBRIC_REVISER)
@require_POST
def complete(request: HttpRequest, version_id: int) -> HttpResponse:
    try:
        version = services.revision_complete(
            user=request.user, version_id=version_id, revision=request.POST.get("revision")
        )
    except DomainError as exc:
        return refuse(request, exc, redirect_to=reverse("rubric_workspace", args=[version_id]))
    messages.success(
        request,
        f"Round complete: {version.rubric.question.image.source_id} "
        f"{version.get_stage_display()} is frozen.",
    )
    target = reverse("rubrics_queue")
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = target
        return response
    return redirect(target)


# --- the benchmark export (admins): made in the background, then downloaded ------------------


@access.role_required(access.ADMIN)
@require_http_methods(["GET", "POST"])
def exports(request: HttpRequest) -> HttpResponse:
    """The exports, newest first, with a form to start one; POST starts it in the background
    and the page shows its progress until it is over, then its download link."""
    if request.method == "POST":
        layout = request.POST.get("layout", "gamut")
        release = request.POST.get("release", "").strip() or None
        if layout not in export_jobs.LAYOUTS:
            messages.error(request, "Choose what to export: GAMUT files or a Hugging Face dataset.")
        elif release and not release_named(release):
            messages.error(request, f"No release is named {release!r}.")
        else:
            try:
                job = export_jobs.launch(request.user, layout, release)
            except ExportError as exc:
                messages.error(request, str(exc))
            except export_jobs.AlreadyRunning as exc:
                messages.info(
                    request,
                    f"An export is being written already (job {exc.job.pk}): wait for it to "
                    "finish, then start the next.",
                )
            except Unavailable as exc:  # the task queue is down: nothing was launched
                messages.error(request, exc.message)
            else:
                messages.success(request, f"Writing the export in the background (job {job.pk}).")
        return redirect("exports")
    found = export_jobs.exports()
    running = next((e for e in found if e.running), None)
    if request.htmx:
        # The progress box polls while an export runs; once it is over, the page reloads to
        # show the download link (or the reason it failed).
        if running is None:
            response = HttpResponse(status=STOP_POLLING)
            response["HX-Refresh"] = "true"
            return response
        return render(request, "rubrics/exports.html#progress", {"running": running})
    return render(
        request,
        "rubrics/exports.html",
        {
            "exports": found,
            "running": running,
            "layouts": export_jobs.LAYOUTS,
            "releases": list(releases().values_list("name", flat=True)),
            "keep": export_jobs.KEEP,
        },
    )


@access.role_required(access.ADMIN)
@require_safe
def export_file(request: HttpRequest, job_id: int) -> FileResponse:
    found = export_jobs.one(job_id)
    path = found.path if found is not None else None
    if path is None:
        raise Http404("This export has no file: it is not finished, it failed, or it was removed.")
    return FileResponse(
        path.open("rb"), as_attachment=True, content_type="application/zip", filename=path.name
    )
