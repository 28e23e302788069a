"""No state changes on GET (issue 22, section 4): a visit of /review/, /adjudicate/, /audit/
or /rubrics/audit/ claims or draws nothing, so that a link from another site cannot; the claim
or draw is a POST to the same address, with the CSRF token, which the page sends on load.
The spot checks' page: judging/tests/test_spot_checks.py."""

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import AdjudicationClaim, ReviewAudit, ReviewClaim, RoundAudit
from annotation.review import services
from annotation.tests.quality import set_rates

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def _held() -> tuple[int, ...]:
    return tuple(
        model.objects.count() for model in (ReviewClaim, AdjudicationClaim, ReviewAudit, RoundAudit)
    )


@pytest.fixture
def work(make_image, alice, bob, carol, dave):
    """A candidate to review, a dispute to settle, resolved reviews and a completed round due
    for audit."""
    from annotation.tests.test_api_training import completed_round

    _, (open_one, disputed) = make_image(texts=["Open?", "Disputed?"])
    services.review_submit(user=alice, candidate_id=disputed.pk, decision="accept")
    services.review_submit(user=bob, candidate_id=disputed.pk, decision="discard")
    for i in range(2):
        _, (c,) = make_image(f"resolved-{i}", [f"Resolved {i}?"])
        services.review_submit(user=alice, candidate_id=c.pk, decision="accept")
        services.review_submit(user=bob, candidate_id=c.pk, decision="accept")
    completed_round(dave)
    set_rates(review_audit_rate=1.0, round_audit_rate=1.0)
    return open_one


PAGES = [("review", "erin"), ("adjudicate", "carol"), ("audit", "carol"), ("round_audit", "olga")]


# Not "page": pytest-playwright's fixture of that name would make this a browser test.
@pytest.mark.parametrize(("address", "who"), PAGES)
def test_a_visit_changes_nothing_and_the_post_needs_its_token(work, address, who, erin, carol):
    from django.contrib.auth.models import Group, User

    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get_or_create(name="rubric_reviser")[0])
    person = {"erin": erin, "carol": carol, "olga": olga}[who]
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(person)
    before = _held()
    html = strict.get(reverse(address)).content.decode()
    assert _held() == before  # nothing claimed, nothing drawn
    # The page claims (or draws) on load, with a POST to itself that carries the token.
    assert 'id="claim-form" method="post"' in html and 'hx-trigger="load"' in html
    assert 'name="csrfmiddlewaretoken"' in html
    # A form from another site has no token: refused, nothing changes.
    assert strict.post(reverse(address), **HTMX).status_code == 403
    assert _held() == before
    token = strict.cookies["csrftoken"].value
    answer = strict.post(reverse(address), HTTP_X_CSRFTOKEN=token, **HTMX)
    assert answer.status_code == 200 and 'data-testid="question"' in answer.content.decode()
    assert _held() != before  # claimed or drawn now
    # Shown again on a visit: what the person holds, with nothing more taken.
    after = _held()
    assert 'data-testid="question"' in strict.get(reverse(address)).content.decode()
    assert _held() == after


@pytest.mark.parametrize(
    ("address", "who"), [("api_review_audits", "carol"), ("api_round_audits", "olga")]
)
def test_the_audit_apis_draw_on_post_only(work, address, who, carol):
    """GET lists what is drawn for this person and draws nothing; POST draws the due share,
    as the pages' POST on load does, then lists."""
    from django.contrib.auth.models import Group, User
    from rest_framework.test import APIClient

    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get_or_create(name="rubric_reviser")[0])
    client = APIClient()
    client.force_authenticate({"carol": carol, "olga": olga}[who])
    before = _held()
    listed = client.get(reverse(address))
    assert listed.status_code == 200 and listed.json() == {"waiting": 0, "audits": []}
    assert _held() == before
    drawn = client.post(reverse(address))
    assert drawn.status_code == 200 and drawn.json()["waiting"] > 0
    assert _held() != before
    after = _held()
    assert client.get(reverse(address)).json()["waiting"] == drawn.json()["waiting"]
    assert _held() == after
