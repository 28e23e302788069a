"""The workspace pages: access, the htmx edits, the stale-save refusal, query counts."""

import pytest
from django.urls import reverse

from rubrics import services
from rubrics.models import RubricCheck, Stage
from rubrics.tests.test_compiler import document, fact, flexible, strict

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def draft(dave, question, meta):
    services.rubric_version_create(question=question(), meta_document=meta,
                                   stage=Stage.LLM_REFINED_1)
    return services.revision_claim(user=dave)


def first_check(version):
    return version.checks.order_by("position").first()


def test_pages_are_for_revisers(client, draft, alice, root, mallory, dave):
    urls = [reverse("rubrics_queue"), reverse("rubric_workspace", args=[draft.pk])]
    for url in urls:
        assert client.get(url).status_code == 302  # anonymous: log in first
    client.force_login(root)  # admins may look at a version, not edit it
    page = client.get(urls[1]).content.decode()
    assert 'data-testid="check-I1"' in page and "Complete this round" not in page
    for person in (alice, root, mallory):
        client.force_login(person)
        assert client.get(urls[0]).status_code == 403
        if person != root:
            assert client.get(urls[1]).status_code == 403
        check = first_check(draft)
        response = client.post(reverse("rubric_check_text", args=[draft.pk, check.pk]),
                               {"text": "x", "revision": 0})
        assert response.status_code == 403
    client.force_login(dave)
    for url in urls:
        assert client.get(url).status_code == 200


def test_queue_and_claim(client, dave, question, meta):
    services.rubric_version_create(question=question(), meta_document=meta,
                                   stage=Stage.IMPORTED)
    client.force_login(dave)
    queue_page = client.get(reverse("rubrics_queue")).content.decode()
    assert 'data-testid="rubrics-waiting">1<' in queue_page
    response = client.post(reverse("rubrics_claim"))
    assert response.status_code == 302 and "/rubrics/versions/" in response.url
    page = client.get(response.url).content.decode()
    assert "Meta-rubric" in page and "core ingredients of beef bourguignon" in page


def test_workspace_shows_both_sides(client, dave, draft):
    client.force_login(dave)
    page = client.get(reverse("rubric_workspace", args=[draft.pk])).content.decode()
    assert 'data-testid="check-I3.base1"' in page
    assert 'data-testid="count-answer_critical"' in page
    assert "flexible · at least 2 of 7" in page
    assert "Flambé with brandy" in page and "optional" in page
    assert "meta-insight: It always uses a red meat." in page


def test_htmx_edit_returns_the_checklist(client, dave, draft):
    client.force_login(dave)
    check = first_check(draft)
    response = client.post(reverse("rubric_check_text", args=[draft.pk, check.pk]),
                           {"text": "Names the dish.", "revision": 0}, **HTMX)
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body
    assert "Names the dish." in body and 'data-revision="1"' in body
    assert "edited by hand" in body
    response = client.post(reverse("rubric_check_tier", args=[draft.pk, check.pk]),
                           {"tier": "context", "revision": 1}, **HTMX)
    assert "tier context, but its meta item&#x27;s rule gives answer_critical" in \
        response.content.decode()


def test_stale_save_is_refused_with_the_current_state_and_the_typing_kept(client, dave, draft):
    client.force_login(dave)
    check = first_check(draft)
    client.post(reverse("rubric_check_text", args=[draft.pk, check.pk]),
                {"text": "Saved first.", "revision": 0}, **HTMX)
    response = client.post(reverse("rubric_check_text", args=[draft.pk, check.pk]),
                           {"text": "Typed on an old page.", "revision": 0}, **HTMX)
    body = response.content.decode()
    assert response.status_code == 409
    assert "Someone else changed this rubric" in body
    assert "Saved first." in body  # the current state
    assert "Typed on an old page." in body  # nothing lost
    check.refresh_from_db()
    assert check.text == "Saved first."


def test_add_delete_move_and_complete(client, dave, draft):
    client.force_login(dave)
    check = first_check(draft)
    url = reverse("rubric_check_delete", args=[draft.pk, check.pk])
    assert client.post(url, {"reason": "", "revision": 0}, **HTMX).status_code == 400
    client.post(url, {"reason": "redundant", "revision": 0}, **HTMX)
    client.post(reverse("rubric_check_add", args=[draft.pk]),
                {"text": "Mentions Burgundy.", "tier": "valuable", "source": "I1",
                 "revision": 1}, **HTMX)
    second = draft.checks.get(check_id="I2.item2")
    client.post(reverse("rubric_check_move", args=[draft.pk, second.pk]),
                {"direction": "up", "revision": 2}, **HTMX)
    ids = list(draft.checks.filter(deleted_at__isnull=True, tier="answer_critical")
               .order_by("position").values_list("check_id", flat=True))
    assert ids[:3] == ["I2.item2", "I2.item1", "I2.item3"]
    response = client.post(reverse("rubric_complete", args=[draft.pk]), {"revision": 3},
                           **HTMX)
    assert response.status_code == 204 and response["HX-Redirect"] == reverse("rubrics_queue")
    draft.refresh_from_db()
    assert draft.frozen_at is not None


def big_meta(n_lists: int) -> dict:
    """About 10 checks a list: rubrics of different sizes for the query-count pin."""
    items = [fact("F1")]
    for k in range(n_lists):
        items.append(strict(f"S{k}", items=[f"member {k}-{i}" for i in range(4)]))
        items.append(flexible(f"L{k}", options=[f"option {k}-{i}" for i in range(5)]))
    return document(*items)


@pytest.mark.parametrize("n_lists", [1, 6])
def test_workspace_query_count_is_constant(client, dave, question, n_lists,
                                           django_assert_max_num_queries):
    services.rubric_version_create(question=question(), meta_document=big_meta(n_lists),
                                   stage=Stage.LLM_REFINED_1)
    version = services.revision_claim(user=dave)
    assert RubricCheck.objects.filter(version=version).count() >= 10 * n_lists
    client.force_login(dave)
    with django_assert_max_num_queries(9):
        assert client.get(reverse("rubric_workspace", args=[version.pk])).status_code == 200
    check = first_check(version)
    with django_assert_max_num_queries(22):
        client.post(reverse("rubric_check_text", args=[version.pk, check.pk]),
                    {"text": "Edited.", "revision": 0}, **HTMX)


def test_scaffold_lists_strict_members_not_dict_items(client, dave, draft):
    client.force_login(dave)
    page = client.get(reverse("rubric_workspace", args=[draft.pk])).content.decode()
    assert "strict · all 3" in page and "<li>red wine</li>" in page
    assert "(&#x27;type&#x27;, &#x27;fact&#x27;)" not in page


def test_history_compares_any_two_versions(client, dave, draft, alice, root):
    row = draft.checks.get(check_id="I1")
    services.check_edit_text(user=dave, version_id=draft.pk, check_pk=row.pk,
                             text="Changed by dave.", revision=0)
    url = reverse("rubric_history", args=[draft.rubric_id])
    client.force_login(alice)
    assert client.get(url).status_code == 403
    client.force_login(root)
    page = client.get(url).content.decode()
    assert "human round 1" in page and "in progress" in page
    assert "<ins>Changed by dave.</ins>" in page  # latest two by default
    first, last = draft.rubric.versions.order_by("id")[0], draft
    page = client.get(url, {"a": first.pk, "b": last.pk}).content.decode()
    assert 'data-testid="compare"' in page and "Changed by dave." in page
