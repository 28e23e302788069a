"""The pages of images: the list and an image's whole history (admins), its photo, the imports
(a JSONL manifest and a zip; CRAG-MM's Parquet shards), and the confirmation of proposed
entities (images/entities.py): one image at a time, with its photo, its CRAG-MM query and answer
and the proposal; `y` confirms, `c` corrects, `s` skips. An image's candidates are not offered
for review until its entity is confirmed."""

from __future__ import annotations

from pathlib import PurePosixPath

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Exists, OuterRef
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from core import access
from core.errors import DomainError, TooLarge
from core.http import refuse
from core.middleware import takes_upload

from ..home.preferences import single_keys
from ..models import (
    AuditEvent,
    Candidate,
    CandidateStatus,
    FinalQuestion,
    Image,
    ImageStatus,
    ImportBatch,
    Popularity,
    image_status,
)
from . import services
from .crag_mm import SPLITS, crag_mm_outcome
from .entities import MARKER
from .importing import (
    CONTENT_TYPES,
    ImportProblems,
    import_from_upload,
    problems_shown,
    read_manifest,
)

SKIPPED = "entity_skipped"  # the session's images skipped in this sitting


def _context(request: HttpRequest, *, notice: str = "", error: DomainError | None = None) -> dict:
    skipped = request.session.get(SKIPPED, [])
    waiting = Image.objects.entity_proposed()
    image = waiting.exclude(pk__in=skipped).order_by("pk").first()
    proposal = (
        AuditEvent.objects.filter(action=MARKER, image=image).order_by("-pk").first()
        if image is not None
        else None
    )
    result = (proposal.data.get("result") or {}) if proposal is not None else {}
    # The proposal's reason, while the entity is still the one proposed.
    same = image is not None and result.get("entity") == image.entity
    return {
        "image": image,
        "reason": result.get("reason", "") if same else "",
        "proposal_job": proposal.data.get("job") if proposal is not None else None,
        "waiting": waiting.count(),
        "skipped": len(skipped),
        "notice": notice,
        "error": error,
        "single_keys": single_keys(request.user),
    }


def _panel(request: HttpRequest, **kwargs) -> HttpResponse:
    status = 400 if kwargs.get("error") is not None else 200
    return render(
        request, "annotation/images/entities.html#panel", _context(request, **kwargs), status=status
    )


@access.role_required(access.ANNOTATOR)
@never_cache  # a form for live work: Back and Forward ask for it anew, never a copy sent before
def entity_page(request: HttpRequest) -> HttpResponse:
    if request.GET.get("skipped") == "clear":
        request.session.pop(SKIPPED, None)
    return render(request, "annotation/images/entities.html", _context(request))


@access.role_required(access.ANNOTATOR)
@require_POST
def entity_confirm(request: HttpRequest, image_id: int) -> HttpResponse:
    """Confirm the proposal shown (no `entity` field) or correct it (`entity`)."""
    corrected = request.POST.get("entity") if request.POST.get("action") == "correct" else None
    try:
        event = services.image_entity_confirm(
            user=request.user,
            image_id=image_id,
            proposed=request.POST.get("proposed", ""),
            corrected=corrected,
        )
    except DomainError as exc:

        def panel(exc: DomainError) -> HttpResponse:
            if exc.status == 400:  # the correction again, its box named
                return _panel(request, error=exc)
            return _panel(request, notice=exc.message)

        return refuse(request, exc, redirect_to="entities", partial=panel)
    entity = event.data["entity"]
    notice = (
        f"Confirmed: {entity}." if event.action == "entity.confirm" else f"Corrected to {entity}."
    )
    if not request.htmx:
        messages.success(request, notice)
        return redirect("entities")
    return _panel(request, notice=notice)


@access.role_required(access.ANNOTATOR)
@require_POST
def entity_skip(request: HttpRequest, image_id: int) -> HttpResponse:
    """Leave this image to someone else for now and show the next one."""
    skipped = request.session.get(SKIPPED, [])
    if image_id not in skipped:
        request.session[SKIPPED] = [*skipped, image_id][-500:]
    notice = "Skipped: someone else may confirm it."
    if not request.htmx:
        messages.success(request, notice)
        return redirect("entities")
    return _panel(request, notice=notice)


# A photo opened on its own: nothing may load or run, and it has no origin of its own.
PHOTO_CSP = "default-src 'none'; sandbox"


@access.role_required(access.MEMBER, api_token=True)
def image_file(request: HttpRequest, source_id: str) -> FileResponse:
    image = get_object_or_404(Image, source_id=source_id)
    # The content type comes from the stored extension, which the import took from the decoded
    # format; a file with any other extension (stored before that, or quarantined by
    # recheck_images) is never served, whatever its bytes.
    content_type = CONTENT_TYPES.get(PurePosixPath(image.file.name).suffix.lower())
    if content_type is None:
        raise Http404("the photo is not a JPEG, PNG, WebP or GIF file; run recheck_images")
    try:
        handle = image.file.open("rb")
    except FileNotFoundError as exc:
        raise Http404("the photo's file is missing") from exc
    response = FileResponse(handle, content_type=content_type)
    response["Cache-Control"] = "private, max-age=3600"
    # Even bytes that are also a script or a page (a polyglot) stay an image: no sniffing, and
    # opened on their own they get a sandbox with no origin and nothing allowed to load or run.
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = PHOTO_CSP
    return response


IMAGES_PER_PAGE = 50


@access.role_required(access.ADMIN)
def image_list(request: HttpRequest) -> HttpResponse:
    """Every image, searchable by source id, entity or wording, filtered by domain, popularity,
    state and the state of a candidate; each row leads to the image's page."""
    params = request.GET
    filters = {
        name: params.get(name, "").strip()
        for name in ("q", "domain", "popularity", "state", "candidates")
    }
    problems = []
    images = Image.objects.with_counts().select_related("question").search(filters["q"])
    if filters["domain"]:
        images = images.filter(domain=filters["domain"])
    for name, choices in (
        ("popularity", Popularity),
        ("state", ImageStatus),
        ("candidates", CandidateStatus),
    ):
        if filters[name] and filters[name] not in choices.values:
            problems.append(f"{name}: {filters[name]!r} is not one of {', '.join(choices.values)}.")
            filters[name] = ""
    if filters["popularity"]:
        images = images.filter(popularity=filters["popularity"])
    if filters["state"]:
        images = images.in_state(filters["state"])
    if filters["candidates"]:
        images = images.filter(
            Exists(Candidate.objects.filter(image=OuterRef("pk"), status=filters["candidates"]))
        )
    page = Paginator(images.order_by("source_id"), IMAGES_PER_PAGE).get_page(params.get("page"))
    for image in page.object_list:
        image.state = image_status(
            n_pending=image.n_pending, n_accepted=image.n_accepted, has_question=image.has_question
        )
    query = params.copy()
    query.pop("page", None)
    return render(
        request,
        "annotation/images/images.html",
        {
            "page": page,
            "filters": filters,
            "problems": problems,
            "query": query.urlencode(),
            "domains": Image.objects.order_by("domain").values_list("domain", flat=True).distinct(),
            "popularities": Popularity.choices,
            "states": ImageStatus.choices,
            "candidate_states": CandidateStatus.choices,
        },
        status=400 if problems else 200,
    )


@access.role_required(access.ADMIN)
def image_page(request: HttpRequest, source_id: str) -> HttpResponse:
    """An image's whole history: candidates by round, every review and adjudication, events."""
    image = get_object_or_404(Image.objects.select_related("question"), source_id=source_id)
    candidates = list(
        image.candidates.select_related("author", "co_author", "adjudication__adjudicator")
        .prefetch_related("reviews__annotator")
        .order_by("round", "id")
    )
    events = image.events.select_related("actor", "candidate").order_by("id")
    question = FinalQuestion.objects.filter(image=image).first()
    return render(
        request,
        "annotation/images/image.html",
        {
            "image": image,
            "question": question,
            "corrections": question.corrections.select_related("made_by") if question else [],
            "candidates": candidates,
            "events": events,
            # A refused correction's fields (questions/views.py), shown again in its form.
            "attempt": request.session.pop("correction_attempt", None) or {},
        },
    )


@takes_upload("IMPORT_MAX_TOTAL_BYTES", "IMPORT_MAX_MANIFEST_BYTES")
@access.role_required(access.ADMIN)
@require_http_methods(["GET", "POST"])
def import_page(request: HttpRequest) -> HttpResponse:
    context: dict = {
        "batches": ImportBatch.objects.select_related("created_by").order_by("-id")[:10]
    }
    if request.method == "POST":
        status = 200
        manifest = request.FILES.get("manifest")
        if manifest is None:
            context["problems"] = ["Choose a manifest file (.jsonl)."]
            context["problem_count"] = 1
        else:
            try:
                result = import_from_upload(
                    read_manifest(manifest),
                    request.FILES.get("images"),
                    actor=request.user,
                    source=ImportBatch.Source.WEB,
                    file_name=manifest.name,
                )
            except ImportProblems as exc:
                context["problems"] = problems_shown(exc.problems)
                context["problem_count"] = len(exc.problems)
            except TooLarge as exc:
                context["problems"] = [exc.message]
                context["problem_count"] = 1
                status = 413
            else:
                context["result"] = result
        # htmx gets the result and, out of band, the recent imports with this one in it.
        context["oob"] = bool(request.htmx)
        template = (
            "annotation/images/import.html#result"
            if request.htmx
            else "annotation/images/import.html"
        )
        if request.htmx:
            status = 200  # htmx shows the problems in place
        elif status == 200 and context.get("problems"):
            status = 400
        return render(request, template, context, status=status)
    return render(request, "annotation/images/import.html", context)


@takes_upload("IMPORT_MAX_TOTAL_BYTES", "IMPORT_MAX_MANIFEST_BYTES")
@access.role_required(access.ADMIN)
def import_crag_mm_page(request: HttpRequest) -> HttpResponse:
    context: dict = {"splits": SPLITS}
    status = 200
    if request.method == "POST":
        try:
            context["outcome"] = crag_mm_outcome(
                request.POST, request.FILES, actor=request.user, source=ImportBatch.Source.WEB
            )
        except ImportProblems as exc:
            context["problems"] = exc.problems
            status = 400
        except TooLarge as exc:
            context["problems"] = [exc.message]
            status = 413
    template = "annotation/images/import_crag_mm.html"
    if request.htmx:
        template += "#result"
    return render(request, template, context, status=status)
