"""The login's limits: django-axes counts failed attempts (settings AXES_*) under the user name
given here, and answers a locked-out pair with the page drawn here."""

from __future__ import annotations

import math
from datetime import timedelta

from django.db.models import Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone


def login_username(request: HttpRequest, credentials: dict | None = None) -> str | None:
    """The user name axes counts a failure under (AXES_USERNAME_CALLABLE): the one posted, cut
    to the longest a user name can be. Django's login form does not enforce that length, and
    axes' attempt table would refuse a longer one (a 500 on PostgreSQL); no user has it anyway."""
    from django.contrib.auth import get_user_model

    username = (credentials or {}).get("username")
    if username is None:
        username = request.POST.get("username")
    longest = get_user_model()._meta.get_field("username").max_length
    return None if username is None else str(username)[:longest]


def login_locked_out(
    request: HttpRequest, original_response=None, credentials: dict | None = None
) -> HttpResponse:
    """What axes answers, on our login page and the admin's, for a (user name, address) pair
    with too many failures: 429, and when the lock lifts (the cool-off after the last failure;
    attempts during the lock are not counted, settings.AXES_RESET_COOL_OFF_ON_FAILURE_...)."""
    from axes.helpers import get_client_username, get_cool_off
    from axes.models import AccessAttempt

    from gamut_site.proxies import client_ip

    username = get_client_username(request, credentials) or ""
    address = getattr(request, "axes_ip_address", None) or client_ip(request)
    now = timezone.now()
    last = (
        AccessAttempt.objects.filter(username=username, ip_address=address).aggregate(
            last=Max("attempt_time")
        )["last"]
        or now
    )
    retry_at = last + (get_cool_off(request) or timedelta(0))
    seconds = max(1, math.ceil((retry_at - now).total_seconds()))
    response = render(
        request,
        "registration/locked_out.html",
        {
            "username": username,
            "retry_at": retry_at,
            "minutes": math.ceil(seconds / 60),
        },
        status=429,
    )
    response["Retry-After"] = str(seconds)
    return response
