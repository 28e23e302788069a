"""API tokens are stored hashed (django-rest-knox): the database holds no token a copy of it
could use; `manage.py api_token` makes one and shows it once; tokens made before the move keep
working and their plain copies are gone."""

from __future__ import annotations

import importlib
import io

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.db import connection
from knox.models import AuthToken
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def claim(token: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client.post("/api/review/claim/").status_code


def every_text_in_the_database() -> str:
    """All rows of every table, as text: what a leaked dump would show."""
    dump = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            quoted = connection.ops.quote_name(table)
            cursor.execute(f"SELECT * FROM {quoted}")  # noqa: S608 (names from the schema)
            dump += [repr(row) for row in cursor.fetchall()]
    return "\n".join(dump)


def run_command(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("api_token", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return exc.returncode, out.getvalue(), str(exc)
    return 0, out.getvalue(), err.getvalue()


def test_the_command_shows_a_token_once_and_stores_only_its_hash(alice):
    code, out, err = run_command("alice")
    assert code == 0
    token = out.strip()
    assert token.startswith("gamut_") and len(token) == 70
    assert "Store it now: it is not shown again." in err and "valid until 20" in err
    assert claim(token) != 401
    stored = AuthToken.objects.get(user=alice)
    assert stored.digest != token and token not in every_text_in_the_database()

    code, out, _ = run_command("alice", "--list")
    assert "1 token(s) of alice." in out
    code, out, _ = run_command("alice", "--revoke")
    assert out.strip() == "1 token(s) of alice revoked."
    assert claim(token) == 401


def test_a_token_without_expiry_and_the_refusals(alice):
    code, out, err = run_command("alice", "--days", "0")
    assert code == 0 and "valid until revoked" in err
    assert AuthToken.objects.get(user=alice).expiry is None
    assert run_command("nobody") == (2, "", "There is no person named 'nobody'.")
    alice.is_active = False
    alice.save()
    assert run_command("alice") == (2, "", "alice is not active: a token would not work.")


def test_a_token_header_that_is_not_utf8_is_a_401_not_a_500(alice):
    client = APIClient(raise_request_exception=False)
    # A header is Latin-1 on the wire: "é" arrives as the byte 0xE9, which is no UTF-8.
    client.credentials(HTTP_AUTHORIZATION="Token gamut_\xe9\xe9")
    response = client.post("/api/review/claim/")
    assert response.status_code == 401
    assert response.json()["detail"] == "Invalid token."


@pytest.mark.django_db(transaction=True)
def test_tokens_made_before_the_move_keep_working_and_lose_their_plain_copy(alice):
    """The migration's step, run on a database that still has authtoken's table (as
    rest_framework.authtoken made it) with a plain key in it."""
    plain = "0123456789abcdef0123456789abcdef01234567"  # DRF's 40 hex characters
    key = connection.ops.quote_name("key")
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE authtoken_token ({key} varchar(40) PRIMARY KEY, "
            "created varchar(40) NOT NULL, user_id integer NOT NULL)"
        )
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO authtoken_token ({key}, created, user_id) VALUES (%s, %s, %s)",
                [plain, "2026-01-01 00:00:00+00:00", alice.pk],
            )
        migration = importlib.import_module("core.migrations.0001_api_tokens_hashed")
        with connection.schema_editor() as editor:
            migration.hash_plain_tokens(apps, editor)
        assert claim(plain) != 401
        assert AuthToken.objects.get(user=alice).digest != plain
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM authtoken_token")
            assert cursor.fetchone() == (0,)
        assert plain not in every_text_in_the_database()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE authtoken_token")


def test_an_admin_makes_a_token_in_the_admin_and_sees_it_once(client, root, alice):
    root.is_superuser = True
    root.save()
    client.force_login(root)
    response = client.post(
        "/admin/knox/authtoken/add/",
        {"user": alice.pk, "expiry_0": "", "expiry_1": ""},
        follow=True,
    )
    assert response.status_code == 200
    messages = [m.message for m in response.context["messages"]]
    (token,) = [m.removeprefix("TOKEN ") for m in messages if m.startswith("TOKEN ")]
    assert token.startswith("gamut_") and claim(token) != 401
    assert token not in every_text_in_the_database()
