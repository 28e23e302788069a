"""The workspace pages: access, the htmx edits (each answered with only what it changed), the
stale-save refusal, query counts."""

import re

import pytest
from django.urls import reverse

from rubrics import services
from rubrics.models import RubricCheck, RubricVersion, Stage
from rubrics.tests.test_compiler import document, fact, flexible, strict

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def draft(dave, question, meta):
    services.rubric_version_create(
        question=question(), meta_document=meta, stage=Stage.LLM_REFINED_1
    )
    return services.revision_claim(user=dave)


def first_check(version):
    return version.checks.order_by("position").first()


def edit(client, draft, name, row=None, **data):
    """POST one htmx edit (of `row`, or an addition) and return (status, body)."""
    args = [draft.pk] if row is None else [draft.pk, row.pk]
    response = client.post(reverse(name, args=args), data, **HTMX)
    return response.status_code, response.content.decode()


def counts(body):
    """The tier counts swapped in out of band."""
    return dict(re.findall(r'data-testid="count-(\w+)" hx-swap-oob="true">(\d+)<', body))


def shown_checks(body):
    return re.findall(r'data-testid="check-([\w.]+)"', body)


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
        response = client.post(
            reverse("rubric_check_text", args=[draft.pk, check.pk]), {"text": "x", "revision": 0}
        )
        assert response.status_code == 403
    client.force_login(dave)
    for url in urls:
        assert client.get(url).status_code == 200


def test_queue_and_claim(client, dave, question, meta):
    services.rubric_version_create(question=question(), meta_document=meta, stage=Stage.IMPORTED)
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
    assert "{#" not in page and "{%" not in page  # no template comment or tag left as text


def test_a_text_edit_answers_with_that_check_and_what_depends_on_it(client, dave, draft):
    client.force_login(dave)
    page = client.get(reverse("rubric_workspace", args=[draft.pk])).content.decode()
    check = first_check(draft)
    status, body = edit(
        client, draft, "rubric_check_text", check, text="Names the dish.", revision=0
    )
    assert status == 200 and "<html" not in body
    # The check, replaced in place, ...
    assert shown_checks(body) == ["I1"]
    assert f'<li class="check origin-edited" id="check-{check.pk}"' in body
    assert "Names the dish." in body and "edited by hand" in body
    # ... and, out of band, the revision (into every form's field) and the diff; no error.
    assert body.startswith(
        '<input type="hidden" name="revision" value="1" '
        'hx-swap-oob="outerHTML:#checklist input[name=revision]">'
    )
    assert body.count('name="revision"') == 2  # that one and the check's own form's
    assert 'name="revision" value="0"' not in body
    assert '<div id="diff-box" hx-swap-oob="true">' in body and "<ins>Names the dish.</ins>" in body
    assert '<div id="edit-error-box" hx-swap-oob="true"></div>' in body
    # Nothing else: not what a text cannot change (the counts, the warnings), not the
    # checklist, no other check, a small part of the page.
    assert counts(body) == {} and "check-total" not in body and "warnings-box" not in body
    assert 'id="checklist"' not in body and 'id="add-check"' not in body
    assert "deleted-box" not in body and len(body) * 5 < len(page)


def test_a_retier_moves_the_check_into_its_tier_group(client, dave, draft):
    client.force_login(dave)
    rows = {r.check_id: r for r in draft.checks.all()}
    status, body = edit(
        client, draft, "rubric_check_tier", rows["I2.item1"], tier="context", revision=0
    )
    assert status == 200 and shown_checks(body) == ["I2.item1"]
    # Taken out of the answer-critical list, put before the first context check after it.
    removal = f'<div hx-swap-oob="delete:#check-{rows["I2.item1"].pk}"></div>'
    insertion = f'<div hx-swap-oob="beforebegin:#check-{rows["I4.step3"].pk}"><li class="check'
    assert body.index(removal) < body.index(insertion)
    assert counts(body) == {"answer_critical": "4", "valuable": "11", "context": "3"}
    assert "I2.item1 is context, but its meta item (I2) makes it answer-critical" in body
    # The last check of the list re-tiered: at the end of its new group.
    status, body = edit(
        client, draft, "rubric_check_tier", rows["I4.seq_all"], tier="valuable", revision=1
    )
    assert '<div hx-swap-oob="beforeend:#checks-valuable">' in body
    assert counts(body) == {"answer_critical": "4", "valuable": "12", "context": "2"}


def test_a_move_puts_the_check_before_its_new_neighbour(client, dave, draft):
    client.force_login(dave)
    rows = {r.check_id: r for r in draft.checks.all()}
    status, body = edit(
        client, draft, "rubric_check_move", rows["I2.item2"], direction="up", revision=0
    )
    assert status == 200 and shown_checks(body) == ["I2.item2"]
    assert f'hx-swap-oob="delete:#check-{rows["I2.item2"].pk}"' in body
    assert f'hx-swap-oob="beforebegin:#check-{rows["I2.item1"].pk}"' in body
    # Nothing that positions do not change: no counts, warnings or diff.
    assert counts(body) == {} and "check-total" not in body
    assert "warnings-box" not in body and "diff-box" not in body


def test_delete_restore_and_add_answer_with_their_check_and_lists(client, dave, draft):
    client.force_login(dave)
    rows = {r.check_id: r for r in draft.checks.all()}
    status, body = edit(
        client, draft, "rubric_check_delete", rows["I2.item2"], reason="redundant", revision=0
    )
    assert status == 200 and shown_checks(body) == []  # taken out, not drawn again
    assert f'<div hx-swap-oob="delete:#check-{rows["I2.item2"].pk}"></div>' in body
    assert '<div id="deleted-box" hx-swap-oob="true"><details class="deleted">' in body
    assert 'data-testid="deleted-I2.item2"' in body and "redundant" in body
    assert "the strict list is missing red wine" in body
    assert counts(body)["answer_critical"] == "4"

    status, body = edit(client, draft, "rubric_check_restore", rows["I2.item2"], revision=1)
    assert status == 200 and shown_checks(body) == ["I2.item2"]
    assert "delete:#check" not in body  # it was not on the page
    assert f'hx-swap-oob="beforebegin:#check-{rows["I2.item3"].pk}"' in body
    assert '<div id="deleted-box" hx-swap-oob="true"></div>' in body  # none deleted now
    assert "strict list is missing" not in body and counts(body)["answer_critical"] == "5"

    status, body = edit(
        client,
        draft,
        "rubric_check_add",
        text="Mentions Burgundy.",
        tier="context",
        source="I1",
        revision=2,
    )
    assert status == 200 and shown_checks(body) == ["H1"]
    assert '<div hx-swap-oob="beforeend:#checks-context"><li class="check origin-added"' in body
    # The add form comes back empty.
    form = body[body.index('<form id="add-check"') :]
    assert 'hx-swap-oob="true"' in form.split(">", 1)[0]
    assert "required></textarea>" in form
    assert counts(body)["context"] == "3"


def test_stale_save_is_refused_with_the_current_state_and_the_typing_kept(client, dave, draft):
    client.force_login(dave)
    check = first_check(draft)
    client.post(
        reverse("rubric_check_text", args=[draft.pk, check.pk]),
        {"text": "Saved first.", "revision": 0},
        **HTMX,
    )
    response = client.post(
        reverse("rubric_check_text", args=[draft.pk, check.pk]),
        {"text": "Typed on an old page.", "revision": 0},
        **HTMX,
    )
    body = response.content.decode()
    assert response.status_code == 409
    # The whole checklist as it stands, in place of the page's: out of band, which needs no
    # target (the button that sent the request may be gone, moved by an earlier save).
    assert "HX-Retarget" not in response
    assert re.search(r'<section id="checklist"[^>]* hx-swap-oob="true">', body)
    assert body.count("hx-swap-oob") == 1
    assert len(shown_checks(body)) == 18
    # Every form carries the current revision: the next save from this state is accepted.
    revisions = re.findall(r'name="revision" value="(\d+)"', body)
    assert len(revisions) == 18 + 2 and set(revisions) == {"1"}  # the checks, add, complete
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
    client.post(
        reverse("rubric_check_add", args=[draft.pk]),
        {"text": "Mentions Burgundy.", "tier": "valuable", "source": "I1", "revision": 1},
        **HTMX,
    )
    second = draft.checks.get(check_id="I2.item2")
    client.post(
        reverse("rubric_check_move", args=[draft.pk, second.pk]),
        {"direction": "up", "revision": 2},
        **HTMX,
    )
    ids = list(
        draft.checks.filter(deleted_at__isnull=True, tier="answer_critical")
        .order_by("position")
        .values_list("check_id", flat=True)
    )
    assert ids[:3] == ["I2.item2", "I2.item1", "I2.item3"]
    response = client.post(reverse("rubric_complete", args=[draft.pk]), {"revision": 3}, **HTMX)
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
def test_workspace_query_count_is_constant(
    client, dave, question, n_lists, django_assert_num_queries
):
    """Were 9 for the page and 22 for an edit (6 and 18 used). Then 5 and 14: the parent's
    rows came in the draft's query, the claim is renewed by one UPDATE (not update_or_create's
    savepoint and second read), a move finds its neighbour in the service's one read of the
    positions, an addition reads the positions as tuples (15); 6 for the page since the
    person's single-key preference (WCAG 2.1.4) is read. Now one more each, pinned exactly
    (7, 15, 16): the parent's rows are read on their own, as the four columns the diff
    compares, which costs less than reading them whole with the draft's (their JSON decoded
    for nothing). Then two fewer for an edit (13, 14): the claim is not read before its
    UPDATE (only when that finds none), and the answer shows the draft the service locked and
    changed (read with its parent), not a second read of it. A move then one fewer (12): it
    changes no difference, so the parent's rows are not read for one. Then 12 for the edits of
    one check as well: when the page's revision is current, its conditional UPDATE locks the
    draft (no SELECT ... FOR UPDATE before it), and the check is read with its draft in one
    query. Then one fewer for everything (page 5, edits 11, add 13) and one more fewer for the
    page: the person's roles and single-key preference were read in the query of the session's
    user by a login backend of our own. Back on Django's ModelBackend (issue 23), the person's
    groups are read in a query of their own on every request, and the preference on the page:
    page 7, edits 12, add 14; a move 11, as it reads the checks whole once (it read their
    positions, then the row it moves)."""
    services.rubric_version_create(
        question=question(), meta_document=big_meta(n_lists), stage=Stage.LLM_REFINED_1
    )
    version = services.revision_claim(user=dave)
    assert RubricCheck.objects.filter(version=version).count() >= 10 * n_lists
    client.force_login(dave)
    with django_assert_num_queries(7):
        assert client.get(reverse("rubric_workspace", args=[version.pk])).status_code == 200
    check = first_check(version)
    edits = [
        ("rubric_check_text", {"text": "Edited."}, 12),
        ("rubric_check_tier", {"tier": "context"}, 12),
        ("rubric_check_move", {"direction": "down"}, 11),
        ("rubric_check_delete", {"reason": "redundant"}, 12),
        ("rubric_check_restore", {}, 12),
    ]
    for revision, (name, data, most) in enumerate(edits):
        with django_assert_num_queries(most):
            response = client.post(
                reverse(name, args=[version.pk, check.pk]), {**data, "revision": revision}, **HTMX
            )
        assert response.status_code == 200, name
    with django_assert_num_queries(14):
        response = client.post(
            reverse("rubric_check_add", args=[version.pk]),
            {"text": "Added.", "tier": "valuable", "revision": len(edits)},
            **HTMX,
        )
    assert response.status_code == 200


def test_scaffold_lists_strict_members_not_dict_items(client, dave, draft):
    client.force_login(dave)
    page = client.get(reverse("rubric_workspace", args=[draft.pk])).content.decode()
    assert "strict · all 3" in page and "<li>red wine</li>" in page
    assert "(&#x27;type&#x27;, &#x27;fact&#x27;)" not in page


def test_history_compares_any_two_versions(client, dave, draft, alice, root):
    row = draft.checks.get(check_id="I1")
    services.check_edit_text(
        user=dave, version_id=draft.pk, check_pk=row.pk, text="Changed by dave.", revision=0
    )
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


def test_check_markup_escapes_everything_it_shows(client, dave, draft):
    """Every value a check shows comes out escaped, in the page and in an edit's answer alike;
    each check has one form, its buttons each posting to their own address."""
    client.force_login(dave)
    check = first_check(draft)
    hostile = '<script>alert("x")</script> & "quotes"'
    check.text, check.source, check.options = hostile, "I1<b>", ["<i>opt</i>"]
    check.steps, check.origin = ['"step"'], "compiled"
    check.save()
    page = client.get(reverse("rubric_workspace", args=[draft.pk])).content.decode()
    item = page[page.index(f'id="check-{check.pk}"') :]
    item = item[: item.index("</li>")]
    assert "<script>" not in item and "<b>" not in item and "<i>" not in item
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &quot;quotes&quot;" in item
    assert "of I1&lt;b&gt;" in item and "&lt;i&gt;opt&lt;/i&gt;" in item
    assert "&quot;step&quot;" in item
    assert item.count("<form") == 1 and item.count('name="csrfmiddlewaretoken"') == 1
    url = reverse("rubric_workspace", args=[draft.pk]) + f"checks/{check.pk}/"
    posts = re.findall(r'hx-post="([^"]+)"', item)
    assert posts == [url + "text/"] + [url + "tier/"] * 3 + [url + "move/"] * 2 + [url + "delete/"]
    status, body = edit(client, draft, "rubric_check_text", check, text=hostile, revision=0)
    assert status == 200 and "<script>" not in body
    assert "&lt;script&gt;" in body


def test_the_diff_follows_the_draft_across_edits(client, dave, draft):
    """The parent's rows are read with the draft's on every page and edit: the diff is against
    the parent as it is stored."""
    client.force_login(dave)
    url = reverse("rubric_workspace", args=[draft.pk])
    first = client.get(url).content.decode()
    check = first_check(draft)
    status, body = edit(
        client, draft, "rubric_check_text", check, text="Names the dish.", revision=0
    )
    assert status == 200 and "<ins>Names the dish.</ins>" in body
    again = client.get(url).content.decode()
    assert "<ins>Names the dish.</ins>" in again and "<ins>" not in first


def test_a_stored_non_http_snippet_url_is_never_a_link(client, dave, draft):
    """Versions stored before the compiler refused other schemes: the workspace shows the
    snippet's title as text, in the scaffold and in each check's evidence."""
    meta = dict(draft.meta_rubric)
    meta["snippets"] = [
        {**s, "url": "javascript:alert(document.domain)"} if s["id"] == "s1" else s
        for s in meta["snippets"]
    ]
    meta["items"] = [{**meta["items"][0], "snippets": ["s1"]}, *meta["items"][1:]]
    RubricVersion.objects.filter(pk=draft.pk).update(meta_rubric=meta)
    RubricCheck.objects.filter(version=draft).update(snippets=["s1", "s2"])
    client.force_login(dave)
    page = client.get(reverse("rubric_workspace", args=[draft.pk])).content.decode()
    assert "javascript:" not in page
    assert 'href="https://example.org/b"' in page  # the http(s) one is still a link
    assert "evidence a" in page  # the snippet itself still shows


def test_the_web_url_filter():
    from django.template import Context, Template

    template = Template("{% load gamut %}{% if url|web_url %}link{% else %}text{% endif %}")
    assert template.render(Context({"url": "https://example.org/"})) == "link"
    for url in ("javascript:alert(1)", "", None, "data:,x"):
        assert template.render(Context({"url": url})) == "text"


def test_an_id_no_column_can_hold_is_a_404_not_a_500(client, dave, draft):
    """An id beyond a bigint matches nothing, in the page's reads and an edit's UPDATEs alike."""
    client.force_login(dave)
    huge = 2**70
    assert client.get(reverse("rubric_workspace", args=[huge])).status_code == 404
    check = first_check(draft)
    for args in ([huge, check.pk], [draft.pk, huge]):
        response = client.post(
            reverse("rubric_check_text", args=args), {"text": "x", "revision": 0}, **HTMX
        )
        assert response.status_code == 404
    draft.refresh_from_db()
    assert draft.revision == 0 and first_check(draft).text == check.text


def test_an_expired_session_is_logged_out(client, dave, draft):
    """Past its expiry date a session is no session."""
    from django.contrib.sessions.models import Session
    from django.utils import timezone

    client.force_login(dave)
    url = reverse("rubric_workspace", args=[draft.pk])
    assert client.get(url).status_code == 200
    Session.objects.update(expire_date=timezone.now())
    response = client.get(url)
    assert response.status_code == 302 and "login" in response["Location"]
