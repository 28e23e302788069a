"""The confirmation of proposed entities (annotation/llm_entities.py): one image at a time, with
its photo, its CRAG-MM query and answer and the proposal; `y` confirms, `c` corrects, `s` skips.
An image's candidates are not offered for review until its entity is confirmed."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from core import access
from core.errors import DomainError
from core.http import refuse

from . import services
from .llm_entities import MARKER
from .models import AuditEvent, Image
from .views import single_keys

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
        request, "annotation/entities.html#panel", _context(request, **kwargs), status=status
    )


@access.role_required(access.ANNOTATOR)
@never_cache  # a form for live work: Back and Forward ask for it anew, never a copy sent before
def entity_page(request: HttpRequest) -> HttpResponse:
    if request.GET.get("skipped") == "clear":
        request.session.pop(SKIPPED, None)
    return render(request, "annotation/entities.html", _context(request))


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
