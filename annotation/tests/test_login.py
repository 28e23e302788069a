"""Logins: the limit on failed attempts (django-axes) behind the TLS proxy, on our login page and
the admin's, and the page that says when to try again.

Behind the proxy every request comes from the proxy's address; the client's is in
X-Forwarded-For. Failures count per (user name, client address), so a stranger guessing names
or passwords locks out only their own guesses, never a colleague behind the same proxy.
"""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

pytestmark = pytest.mark.django_db

PROXY = "10.0.0.2"
ATTACKER = "203.0.113.9"
ALICE_HOME = "198.51.100.7"


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.TRUSTED_PROXIES = [PROXY]
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)


def via_proxy(client_address: str) -> dict:
    return {"REMOTE_ADDR": PROXY, "HTTP_X_FORWARDED_FOR": client_address}


def log_in(client, username: str, password: str, *, url: str | None = None, **meta):
    return client.post(
        url or reverse("login"), {"username": username, "password": password}, **meta
    )


def logged_in(client) -> bool:
    return "_auth_user_id" in client.session


def test_login_and_logout(client, alice):
    assert log_in(client, "alice", "alice-pass").status_code == 302
    assert client.get("/").status_code == 200
    client.post(reverse("logout"))
    assert client.get("/").status_code == 302


def test_random_names_behind_the_proxy_do_not_lock_out_a_real_user(client, alice):
    for i in range(10):
        response = log_in(client, f"guess-{i}", "wrong", **via_proxy(ATTACKER))
        assert response.status_code == 200
    # The stranger even guesses alice's password until locked: that locks the stranger's
    # address for alice, not alice at hers.
    for _ in range(3):
        log_in(client, "alice", "wrong", **via_proxy(ATTACKER))
    assert log_in(client, "alice", "alice-pass", **via_proxy(ATTACKER)).status_code == 429
    assert not logged_in(client)
    assert log_in(client, "alice", "alice-pass", **via_proxy(ALICE_HOME)).status_code == 302
    assert logged_in(client)
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {ATTACKER}


def test_failures_lock_the_pair_and_the_right_password_is_refused_then(client, alice):
    for attempt in range(1, 3):
        response = log_in(client, "alice", "wrong", **via_proxy(ALICE_HOME))
        assert response.status_code == 200, attempt
        assert "do not match" in response.content.decode()
    assert log_in(client, "alice", "wrong", **via_proxy(ALICE_HOME)).status_code == 429
    assert log_in(client, "alice", "alice-pass", **via_proxy(ALICE_HOME)).status_code == 429
    assert not logged_in(client)
    # Once the cool-off has passed since the last failure, the right password works again.
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(minutes=15, seconds=1))
    assert log_in(client, "alice", "alice-pass", **via_proxy(ALICE_HOME)).status_code == 302


def test_forwarded_for_from_an_untrusted_address_is_ignored(client, alice):
    """A client that talks to the server directly cannot pick its address with the header."""
    for i in range(3):
        log_in(
            client, "alice", "wrong", REMOTE_ADDR="192.0.2.50", HTTP_X_FORWARDED_FOR=f"198.18.0.{i}"
        )
    response = log_in(
        client, "alice", "alice-pass", REMOTE_ADDR="192.0.2.50", HTTP_X_FORWARDED_FOR="198.18.0.99"
    )
    assert response.status_code == 429
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"192.0.2.50"}


def test_a_success_resets_the_count(client, alice):
    for _ in range(2):
        log_in(client, "alice", "wrong", **via_proxy(ALICE_HOME))
    assert log_in(client, "alice", "alice-pass", **via_proxy(ALICE_HOME)).status_code == 302
    client.post(reverse("logout"))
    for _ in range(2):
        assert log_in(client, "alice", "wrong", **via_proxy(ALICE_HOME)).status_code == 200
    assert log_in(client, "alice", "alice-pass", **via_proxy(ALICE_HOME)).status_code == 302


def test_admin_login_is_under_the_same_limit(client, root):
    url = reverse("admin:login")
    for _ in range(2):
        response = log_in(client, "root", "wrong", url=url, **via_proxy(ALICE_HOME))
        assert response.status_code == 200
        assert "correct username and password" in response.content.decode()
    assert log_in(client, "root", "wrong", url=url, **via_proxy(ALICE_HOME)).status_code == 429
    response = log_in(client, "root", "root-pass", url=url, **via_proxy(ALICE_HOME))
    assert response.status_code == 429
    assert not logged_in(client)
    # The two login pages share the count: the lock holds on ours too.
    assert log_in(client, "root", "root-pass", **via_proxy(ALICE_HOME)).status_code == 429
    assert client.get(reverse("admin:index")).status_code == 302


def test_the_lockout_page_says_when_to_retry(client, alice, settings):
    settings.TIME_ZONE = "UTC"
    for _ in range(2):
        log_in(client, "alice", "wrong", **via_proxy(ALICE_HOME))
    before = timezone.now()
    response = log_in(client, "alice", "wrong", **via_proxy(ALICE_HOME))
    assert response.status_code == 429
    page = response.content.decode()
    retry_at = AccessAttempt.objects.get().attempt_time + timedelta(minutes=15)
    assert retry_at - before >= timedelta(minutes=15)
    assert f"Try again after {retry_at:%H:%M} UTC" in page
    assert "in 15 minutes" in page
    assert 895 <= int(response["Retry-After"]) <= 900
    assert "GAMUT review" in page and 'class="card narrow"' in page  # the site's own page
    # A second look later counts down, and does not push the time back.
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(minutes=14))
    response = log_in(client, "alice", "alice-pass", **via_proxy(ALICE_HOME))
    assert response.status_code == 429
    assert "in 1 minute)" in response.content.decode()
    assert int(response["Retry-After"]) <= 60


def test_a_token_keeps_working_for_a_locked_out_user(client, alice):
    """The limit guards passwords; an API token is another credential and is not locked."""
    from knox.models import AuthToken

    _, key = AuthToken.objects.create(user=alice)
    for _ in range(3):
        log_in(client, "alice", "wrong")
    assert log_in(client, "alice", "alice-pass").status_code == 429
    response = client.get(reverse("api_image", args=["none"]), HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 404


def test_query_counts(client, alice, django_assert_num_queries):
    with django_assert_num_queries(0):
        assert client.get(reverse("login")).status_code == 200
    with django_assert_num_queries(10):  # the first failure creates the pair's attempt row
        assert log_in(client, "alice", "wrong").status_code == 200
    with django_assert_num_queries(8):
        assert log_in(client, "alice", "wrong").status_code == 200
    with django_assert_num_queries(9):
        assert log_in(client, "alice", "wrong").status_code == 429  # the lockout page
    with django_assert_num_queries(3):
        assert log_in(client, "alice", "alice-pass").status_code == 429
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(minutes=16))
    with django_assert_num_queries(15):
        assert log_in(client, "alice", "alice-pass").status_code == 302


@pytest.mark.parametrize("username", ["a\x00b", "x" * 10_000, "<script>alert(1)</script>"])
def test_hostile_user_names_get_a_clear_answer(client, username):
    if "\x00" in username:
        # The input boundary (core) refuses a control character before any view: a 400 naming
        # the field, on both login pages, and nothing to count.
        for url in (reverse("login"), reverse("admin:login")):
            response = log_in(client, username, "wrong", url=url, **via_proxy(ATTACKER))
            assert response.status_code == 400
            assert "username" in response.content.decode()
        assert not AccessAttempt.objects.exists()
        return
    for url in (reverse("login"), reverse("admin:login")):
        response = log_in(client, username, "wrong", url=url, **via_proxy(ATTACKER))
        assert response.status_code == 200
        assert "<script>alert(1)" not in response.content.decode()
    response = log_in(client, username, "wrong", **via_proxy(ATTACKER))
    # Counted (a name longer than any user name's column under its first 150 characters; the
    # whole of it was a 500 on PostgreSQL), locked on the third failure, on an escaped page.
    assert response.status_code == 429
    assert AccessAttempt.objects.get().username == username[:150]
    if username.startswith("<"):
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in response.content.decode()
