"""The rubric workspace over the API: the same edits as the page (rubrics/services.py), the
same optimistic locking (the draft's revision), the same refusals, as JSON."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from conftest import _user
from rubrics import services
from rubrics.models import CheckEdit, RubricCheck, RubricVersion, Stage

pytestmark = pytest.mark.django_db


@pytest.fixture
def draft(dave, question, meta):
    services.rubric_version_create(
        question=question(), meta_document=meta, stage=Stage.LLM_REFINED_1
    )
    return services.revision_claim(user=dave)


def api(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def url(name: str, *args: int) -> str:
    return reverse(name, args=args)


def live(version: RubricVersion) -> list[RubricCheck]:
    return list(version.checks.filter(deleted_at__isnull=True).order_by("position"))


def test_claim_then_read_the_draft(dave, question, meta, django_assert_num_queries):
    services.rubric_version_create(
        question=question(), meta_document=meta, stage=Stage.LLM_REFINED_1
    )
    claimed = api(dave).post(url("api_rubric_claim"))
    assert claimed.status_code == 200
    body = claimed.json()
    assert (body["stage"], body["revision"], body["editable"], body["frozen"]) == (
        Stage.HUMAN_1,
        0,
        True,
        False,
    )
    assert body["source_id"] == "img-1" and body["meta_rubric"]["items"]
    assert [c["check_id"] for c in body["checks"]] == [
        c.check_id for c in RubricCheck.objects.filter(version_id=body["id"]).order_by("position")
    ]
    client = api(dave)
    # The version with its question and image in one query, then its checks (the roles were
    # read before, onto the user object that force_authenticate passes).
    with django_assert_num_queries(2):
        assert client.get(url("api_rubric_version", body["id"])).json() == body


def test_nothing_waiting_is_204(dave):
    assert api(dave).post(url("api_rubric_claim")).status_code == 204


def test_every_edit_over_the_api(dave, draft):
    client = api(dave)
    first, second = live(draft)[:2]
    steps = [
        ("patch", url("api_rubric_check", draft.pk, first.pk), {"text": "  A new   text "}),
        ("patch", url("api_rubric_check", draft.pk, first.pk), {"tier": "context"}),
        ("delete", url("api_rubric_check", draft.pk, second.pk), {"reason": "duplicate"}),
        ("post", url("api_rubric_check_restore", draft.pk, second.pk), {}),
        (
            "post",
            url("api_rubric_check_add", draft.pk),
            {"text": "Says when", "tier": "valuable", "source": "I1", "after": first.pk},
        ),
        ("post", url("api_rubric_check_move", draft.pk, second.pk), {"direction": "up"}),
        ("post", url("api_rubric_check_move", draft.pk, second.pk), {"to_position": 1}),
    ]
    for revision, (method, address, data) in enumerate(steps):
        response = getattr(client, method)(address, {**data, "revision": revision}, format="json")
        created = address == url("api_rubric_check_add", draft.pk)
        assert response.status_code == (201 if created else 200), response.json()
        assert response.json()["revision"] == revision + 1
    first.refresh_from_db()
    assert (first.text, first.tier, first.origin) == ("A new text", "context", "edited")
    added = RubricCheck.objects.get(version=draft, check_id="H1")
    assert (added.source, added.origin, added.position) == ("I1", "added", first.position + 1)
    assert live(draft)[0].pk == second.pk
    assert list(
        CheckEdit.objects.filter(version=draft).order_by("pk").values_list("op", flat=True)
    ) == ["edit", "retier", "delete", "restore", "add", "move", "move"]
    done = client.post(
        url("api_rubric_complete", draft.pk), {"revision": len(steps)}, format="json"
    )
    assert done.status_code == 200 and done.json()["frozen"] is True
    assert done.json()["editable"] is False


def test_a_stale_revision_is_409_with_the_current_state(dave, draft):
    client = api(dave)
    row = live(draft)[0]
    assert (
        client.patch(
            url("api_rubric_check", draft.pk, row.pk),
            {"text": "first", "revision": 0},
            format="json",
        ).status_code
        == 200
    )
    stale = client.patch(
        url("api_rubric_check", draft.pk, row.pk), {"text": "second", "revision": 0}, format="json"
    )
    assert stale.status_code == 409
    body = stale.json()
    assert body["field"] == "revision" and "Someone else changed this rubric" in body["detail"]
    assert body["current"]["revision"] == 1
    assert body["current"]["checks"][0]["text"] == "first"
    row.refresh_from_db()
    assert row.text == "first"  # nothing of the stale save was written


@pytest.mark.parametrize(
    "method, name, data, status, field",
    [
        ("patch", "api_rubric_check", {"revision": 0}, 400, "text"),
        ("patch", "api_rubric_check", {"revision": 0, "text": "x", "tier": "context"}, 400, "text"),
        ("patch", "api_rubric_check", {"revision": 0, "text": "   "}, 400, "text"),
        ("patch", "api_rubric_check", {"revision": 0, "tier": "vital"}, 400, "tier"),
        ("patch", "api_rubric_check", {"text": "x"}, 400, "revision"),
        ("patch", "api_rubric_check", {"text": "x", "revision": "soon"}, 400, "revision"),
        ("delete", "api_rubric_check", {"revision": 0, "reason": ""}, 400, "reason"),
        ("post", "api_rubric_check_restore", {"revision": 0}, 409, None),
        (
            "post",
            "api_rubric_check_move",
            {"revision": 0, "direction": "sideways"},
            400,
            "direction",
        ),
        ("post", "api_rubric_check_move", {"revision": 0}, 400, "direction"),
        (
            "post",
            "api_rubric_check_add",
            {"revision": 0, "text": "t", "tier": "valuable", "source": "I99"},
            400,
            "source",
        ),
    ],
)
def test_refusals_name_the_field_and_write_nothing(dave, draft, method, name, data, status, field):
    row = live(draft)[0]
    args = (draft.pk,) if name == "api_rubric_check_add" else (draft.pk, row.pk)
    response = getattr(api(dave), method)(url(name, *args), data, format="json")
    assert response.status_code == status, response.json()
    assert response.json().get("field") == field and response.json()["detail"]
    draft.refresh_from_db()
    assert draft.revision == 0 and not CheckEdit.objects.exists()


def test_a_body_that_is_no_object_is_400(dave, draft):
    row = live(draft)[0]
    response = api(dave).patch(url("api_rubric_check", draft.pk, row.pk), [1, 2], format="json")
    assert response.status_code == 400 and "JSON object" in response.json()["detail"]


def test_who_may_edit(dave, draft, alice, root, mallory):
    row = live(draft)[0]
    edit = url("api_rubric_check", draft.pk, row.pk)
    assert api().patch(edit, {"text": "x", "revision": 0}, format="json").status_code in (401, 403)
    for user in (alice, root, mallory):
        refused = api(user).patch(edit, {"text": "x", "revision": 0}, format="json")
        assert refused.status_code == 403
    # Admins read (as on the page), never edit; annotators do not read.
    assert api(root).get(url("api_rubric_version", draft.pk)).json()["editable"] is False
    assert api(alice).get(url("api_rubric_version", draft.pk)).status_code == 403
    # Another reviser is refused while dave holds the draft.
    eve = _user("eve", "rubric_reviser")
    held = api(eve).patch(edit, {"text": "x", "revision": 0}, format="json")
    assert held.status_code == 403 and "Another reviser" in held.json()["detail"]
    assert api(dave).get(url("api_rubric_version", 999999)).status_code == 404
    missing = api(dave).patch(
        url("api_rubric_check", draft.pk, 999999), {"text": "x", "revision": 0}, format="json"
    )
    assert missing.status_code == 404
    draft.refresh_from_db()
    assert draft.revision == 0
