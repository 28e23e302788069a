"""Who may do what: every view and API endpoint asks here, nowhere else.

Pages and endpoints declare their audience with `@role_required(...)` (in the manner of
healthchecks' `authorize`); services ask the `is_*` predicates, since a service is also called
from commands and tasks."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import prefetch_related_objects
from django.http import HttpResponse

ANNOTATOR = "annotator"
ADJUDICATOR = "adjudicator"
RUBRIC_REVISER = "rubric_reviser"
ROLE_GROUPS = (ANNOTATOR, ADJUDICATOR, RUBRIC_REVISER)
ADMIN = "admin"  # staff users; not a group
MEMBER = "member"  # any of the above

_AUDIENCE = {
    ANNOTATOR: "annotators",
    ADJUDICATOR: "adjudicators",
    RUBRIC_REVISER: "rubric revisers",
    ADMIN: "admins",
}


def roles(user) -> frozenset[str]:
    """The person's roles (ROLE_GROUPS they are in, and ADMIN for staff). Their groups are read
    once per request: prefetched onto the user object, where Django keeps them until the
    person's groups are changed through it."""
    if not user.is_authenticated:
        return frozenset()
    prefetch_related_objects([user], "groups")
    found = frozenset(g.name for g in user.groups.all() if g.name in ROLE_GROUPS)
    return found | {ADMIN} if user.is_staff else found


def is_annotator(user) -> bool:
    return ANNOTATOR in roles(user)


def is_adjudicator(user) -> bool:
    return ADJUDICATOR in roles(user)


def is_reviser(user) -> bool:
    return RUBRIC_REVISER in roles(user)


def is_admin(user) -> bool:
    return bool(user.is_authenticated and user.is_staff)


def is_member(user) -> bool:
    """Anyone with a role in the project (annotator, adjudicator, reviser or admin)."""
    return bool(roles(user) & {*ROLE_GROUPS, ADMIN})


def has_role(user, *wanted: str) -> bool:
    """Whether the person holds any of these roles (MEMBER: any role at all)."""
    if MEMBER in wanted and is_member(user):
        return True
    if ADMIN in wanted and is_admin(user):
        return True
    return bool(roles(user) & set(wanted))


def require_role(user, *wanted: str, message: str | None = None) -> None:
    """PermissionDenied (403) unless the person holds one of these roles."""
    if not has_role(user, *wanted):
        if message:
            raise PermissionDenied(message)
        if MEMBER in wanted:
            raise PermissionDenied("You have no role in this project.")
        audience = " and ".join(_AUDIENCE[r] for r in wanted)
        raise PermissionDenied(f"This page is for {audience}.")


def audience(role: str) -> str:
    """The people of a role, in words ("admins")."""
    return "members of the project" if role == MEMBER else _AUDIENCE[role]


def _token_user(request):
    """The user of an `Authorization: Token <key>` header (the API's credentials), None when
    there is no such header; AuthenticationFailed (401) for a wrong key."""
    from .auth import TokenAuthentication

    found = TokenAuthentication().authenticate(request)
    return found[0] if found else None


def api_token_user(request):
    """The user of a valid API token the request carries, else None (no token, a wrong one)."""
    from rest_framework.exceptions import AuthenticationFailed

    try:
        return _token_user(request)
    except AuthenticationFailed:
        return None


def role_required(*wanted: str, message: str | None = None, api_token: bool = False) -> Callable:
    """A view for people holding one of these roles: anonymous visitors of a page are sent to
    the login page (an API request never gets here: DRF answers 401 first), people without the
    role get 403. Put it under @api_view on API functions, so that DRF's user is the one asked.
    `api_token`: a page the API links to (the photos) also takes the API's token."""
    unknown = set(wanted) - {*_AUDIENCE, MEMBER}
    if not wanted or unknown:
        raise ValueError(f"role_required: unknown roles {sorted(unknown)}")

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapper(request, *args: Any, **kwargs: Any):
            if api_token and request.headers.get("Authorization", "").startswith("Token "):
                from rest_framework.exceptions import AuthenticationFailed

                try:
                    request.user = _token_user(request)
                except AuthenticationFailed as exc:
                    return HttpResponse(
                        str(exc.detail),
                        status=401,
                        headers={"WWW-Authenticate": "Token"},
                        content_type="text/plain",
                    )
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            require_role(request.user, *wanted, message=message)
            return view(request, *args, **kwargs)

        wrapper.required_roles = wanted  # read by the test that every URL declares its audience
        return wrapper

    return decorator


class IsMember:
    """DRF permission: a person with a role in the project (the API schema and its docs)."""

    message = "You have no role in this project."

    def has_permission(self, request, view) -> bool:
        return is_member(request.user)

    def has_object_permission(self, request, view, obj) -> bool:
        return is_member(request.user)
