"""One place for roles: every page and endpoint says who it is for (core.access), and the
people without the role are refused the same way everywhere."""

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from knox.models import AuthToken
from rest_framework.test import APIClient

from core import access

pytestmark = pytest.mark.django_db

# Open to anyone (the login page, the home page that says what waits for you, the documentation:
# the repository's own text, served as static files, the upload gate nginx asks, which tells a
# person only whether they may send a large body) or guarded by Django's admin itself.
OPEN = {"home", "login", "logout", "docs", "upload_gate"}
SAMPLE_ARGS = {"source_id": "img-1"}


def _patterns():
    for entry in get_resolver().url_patterns:
        if isinstance(entry, URLResolver):
            continue  # /admin/: Django's admin has its own staff check
        assert isinstance(entry, URLPattern)
        if entry.name in OPEN:
            continue
        kwargs = {name: SAMPLE_ARGS.get(name, 1) for name in entry.pattern.converters}
        yield entry.name, str(entry.pattern), kwargs


def _url(route: str, kwargs: dict) -> str:
    for name, value in kwargs.items():
        route = route.replace(f"<int:{name}>", str(value)).replace(f"<str:{name}>", str(value))
    return "/" + route


ROUTES = list(_patterns())


def test_every_page_outside_the_api_declares_its_audience():
    missing = []
    for entry in get_resolver().url_patterns:
        if isinstance(entry, URLResolver) or entry.name in OPEN:
            continue
        if str(entry.pattern).startswith("api/"):
            continue  # DRF views: the refusals below check them
        if not getattr(entry.callback, "required_roles", None):
            missing.append(entry.name)
    assert missing == []


@pytest.mark.parametrize(("name", "route", "kwargs"), ROUTES, ids=[r[0] for r in ROUTES])
def test_a_person_without_a_role_is_refused_everywhere(name, route, kwargs, mallory):
    url = _url(route, kwargs)
    client = Client()
    client.force_login(mallory)
    for method in (client.get, client.post):
        response = method(url)
        assert response.status_code in (403, 405), (method.__name__, url, response.status_code)
    if route.startswith("api/") or name == "image_file":  # what takes the API's token
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=mallory)[1]}")
        assert api.get(url).status_code in (403, 405)


@pytest.mark.parametrize(("name", "route", "kwargs"), ROUTES, ids=[r[0] for r in ROUTES])
def test_anonymous_visitors_are_sent_to_log_in(name, route, kwargs):
    url = _url(route, kwargs)
    response = Client().get(url)
    if route.startswith("api/"):
        assert response.status_code == 401
        if name not in ("schema", "api_docs"):  # those answer in their own formats
            assert response.json()["detail"]
    else:
        assert response.status_code in (302, 405)
        if response.status_code == 302:
            assert response["Location"].startswith("/login/?next=")


def test_the_api_schema_and_docs_are_for_members(alice, mallory):
    for url in ("/api/schema/", "/api/docs/"):
        assert Client().get(url).status_code in (401, 403)
        client = Client()
        client.force_login(mallory)
        assert client.get(url).status_code == 403, url
        client.force_login(alice)
        assert client.get(url).status_code == 200, url


def test_role_required_names_only_known_roles():
    with pytest.raises(ValueError, match="unknown roles"):
        access.role_required("reviewer")
    with pytest.raises(ValueError):
        access.role_required()


def test_roles_are_read_once_per_request(alice, django_assert_num_queries):
    with django_assert_num_queries(1):
        assert access.is_annotator(alice)
        assert not access.is_adjudicator(alice)
        assert access.is_member(alice)
        assert access.has_role(alice, access.ADMIN, access.ANNOTATOR)
        assert not access.has_role(alice, access.ADMIN)


def test_a_change_of_groups_through_the_user_shows_at_once(alice, django_assert_num_queries):
    """The groups are kept on the user object for the request, until they change through it."""
    from django.contrib.auth.models import Group

    assert access.roles(alice) == {access.ANNOTATOR}
    alice.groups.add(Group.objects.get_or_create(name="adjudicator")[0])
    with django_assert_num_queries(1):
        assert access.roles(alice) == {access.ANNOTATOR, access.ADJUDICATOR}
        assert access.is_adjudicator(alice)
    alice.groups.clear()
    assert not access.is_member(alice)


def test_the_preference_is_read_once_and_follows_a_change(alice, django_assert_num_queries):
    from annotation.home import preferences as services
    from annotation.home.preferences import single_keys

    with django_assert_num_queries(1):
        assert single_keys(alice) is True  # on until turned off: no preference stored
        assert single_keys(alice) is True
    services.preference_set(user=alice, single_key_shortcuts=False)
    with django_assert_num_queries(0):
        assert single_keys(alice) is False
    services.preference_set(user=alice, single_key_shortcuts=True)
    with django_assert_num_queries(0):
        assert single_keys(alice) is True


def test_the_session_user_comes_with_roles_read_afresh_each_request(alice, client):
    """The roles and the single-key preference are read afresh with each request's user: a
    change of either shows on the very next request, and a group that is no role gives no
    role."""
    from django.contrib.auth.models import Group

    from annotation.models import Preference

    client.force_login(alice)
    assert client.get("/review/").status_code == 200
    alice.groups.clear()
    alice.groups.add(Group.objects.get_or_create(name="visitors")[0])
    assert client.get("/review/").status_code == 403
    alice.groups.add(Group.objects.get_or_create(name="adjudicator")[0])
    assert client.get("/adjudicate/").status_code == 200
    assert client.get("/review/").status_code == 403

    alice.groups.add(Group.objects.get_or_create(name="annotator")[0])
    page = client.get("/review/")
    assert page.context["single_keys"] is True and page.context["is_adjudicator"]
    Preference.objects.create(user=alice, single_key_shortcuts=False)
    assert client.get("/review/").context["single_keys"] is False


def test_a_deactivated_person_is_logged_out_on_the_next_request(alice, client):
    client.force_login(alice)
    assert client.get("/review/").status_code == 200
    alice.is_active = False
    alice.save(update_fields=["is_active"])
    answer = client.get("/review/")
    assert answer.status_code == 302 and answer["Location"].startswith("/login/")


def test_a_group_that_is_no_role_gives_no_role(alice):
    from django.contrib.auth.models import Group

    alice.groups.add(Group.objects.get_or_create(name="visitors")[0])
    assert access.roles(alice) == {access.ANNOTATOR}
