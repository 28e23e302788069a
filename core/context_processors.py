"""What every page's template may read: the limits of the text fields (core.text.LIMITS), so
that a field's maxlength and counter are the number its service refuses beyond."""

from __future__ import annotations

from django.http import HttpRequest

from .text import LIMITS


def limits(request: HttpRequest) -> dict:
    return {"limits": LIMITS}
