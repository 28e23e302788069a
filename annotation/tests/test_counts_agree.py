"""Numbers on one screen agree with what the screen offers (issue 24, section 2)."""

import re

import pytest
from django.urls import reverse

from annotation.review import services

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def _figure(html: str, testid: str) -> str | None:
    found = re.search(rf'data-testid="{testid}"[^>]*>([^<]*)<', html)
    return found.group(1).strip() if found else None


def test_review_waiting_leaves_out_candidates_whose_slots_others_hold(
    client, make_image, alice, bob, erin, django_assert_num_queries
):
    _, (last,) = make_image("img-1", ["What is this?"])
    # bob reviewed it and erin holds the second slot: alice cannot be given it.
    services.review_submit(user=bob, candidate_id=last.pk, decision="accept")
    assert services.review_claim(user=erin).candidate.pk == last.pk
    client.force_login(alice)
    # 14: Waiting and held are two counts (CandidateQuerySet.waiting_counts says why)
    with django_assert_num_queries(14):
        html = client.post(reverse("review"), **HTMX).content.decode()
    assert "Nothing to review" in html
    assert _figure(html, "waiting") == "0"
    assert _figure(html, "held") == "(1 held by someone else)"
    # The home page says the same.
    home = client.get("/").content.decode()
    assert re.search(r'id="home-waiting">0<', home)
    assert "1 more held by someone else" in home


def test_review_waiting_counts_a_free_slot_and_the_candidate_held(client, make_image, alice, bob):
    _, (c,) = make_image("img-1", ["What is this?"])
    services.review_claim(user=bob)  # one slot of two taken: alice can still have the other
    client.force_login(alice)
    html = client.post(reverse("review"), **HTMX).content.decode()
    assert 'data-testid="question"' in html
    assert _figure(html, "waiting") == "1"
    assert _figure(html, "held") is None
    # Her own claim does not count against her.
    html = client.get(reverse("review")).content.decode()
    assert _figure(html, "waiting") == "1"


def test_the_weekly_trend_is_drawn_from_two_weeks_with_points_and_labels():
    from annotation.analysis.quality_report import trend_chart

    def week(day, accuracy, overturn):
        return {
            "week": day,
            "annotator": "all",
            "gold_accuracy": accuracy,
            "overturn_rate": overturn,
        }

    one = trend_chart([week("2026-11-30", 0.5, None)])
    assert one["drawn"] is False and one["weeks"] == ["2026-11-30"]
    two = trend_chart(
        [
            week("2026-11-23", 1.0, 0.25),
            {**week("2026-11-23", 0, 0), "annotator": "alice"},
            week("2026-11-30", 0.5, None),
        ]
    )
    assert two["drawn"] is True
    assert two["accuracy_marks"] == [
        ("0.0", "0.0", "2026-11-23: 100%"),
        ("100.0", "20.0", "2026-11-30: 50%"),
    ]
    assert two["overturn_marks"] == [("0.0", "30.0", "2026-11-23: 25%")]  # a gap where none
    assert two["accuracy"] == "0.0,0.0 100.0,20.0"
