"""Who may do what: every view and API endpoint asks here, nowhere else."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404

ANNOTATOR = "annotator"
ADJUDICATOR = "adjudicator"
RUBRIC_REVISER = "rubric_reviser"
ROLE_GROUPS = (ANNOTATOR, ADJUDICATOR, RUBRIC_REVISER)


def roles(user) -> frozenset[str]:
    """The person's group names, read once per request and kept on the user object."""
    if not user.is_authenticated:
        return frozenset()
    cached = getattr(user, "_gamut_roles", None)
    if cached is None:
        cached = frozenset(user.groups.values_list("name", flat=True))
        if user.is_staff:
            cached |= {"admin"}
        user._gamut_roles = cached
    return cached


def is_annotator(user) -> bool:
    return ANNOTATOR in roles(user)


def is_adjudicator(user) -> bool:
    return ADJUDICATOR in roles(user)


def is_admin(user) -> bool:
    return bool(user.is_authenticated and user.is_staff)


def is_member(user) -> bool:
    """Anyone with a role in the project (annotator, adjudicator, reviser or admin)."""
    return bool(roles(user))


def get_candidate_for(user, candidate_id: int):
    """A candidate this person may look at, or 404 (a candidate's existence is no secret to
    members, but its reviews are filtered by `Review.objects.visible_to`)."""
    from .models import Candidate

    if not is_member(user):
        raise PermissionDenied("You have no role in this project.")
    try:
        return Candidate.objects.select_related("image", "parent").get(pk=candidate_id)
    except Candidate.DoesNotExist as exc:
        raise Http404("no such candidate") from exc
