"""A person's preferences: single-key shortcuts on or off (on unless turned off)."""

from __future__ import annotations

from django.db import transaction

from core.errors import NotAllowed

from ..models import (
    Preference,
)


@transaction.atomic
def preference_set(*, user, single_key_shortcuts: bool) -> Preference:
    if not user.is_authenticated:
        raise NotAllowed("Log in first.")
    preference, _ = Preference.objects.update_or_create(
        user=user, defaults={"single_key_shortcuts": bool(single_key_shortcuts)}
    )
    # Kept on the user object, so that anything drawn later in the same request shows the new
    # setting, not the one read before.
    user.preference = preference
    return preference


def single_keys(user) -> bool:
    """Whether this person's pages answer single-key shortcuts (on unless turned off). The
    preference is read once per request: Django keeps it on the user object."""
    try:
        return user.preference.single_key_shortcuts
    except Preference.DoesNotExist:
        return True
