"""Stage-1 rules, service by service: every resolution branch and every refusal."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.models import (
    Adjudication,
    AuditEvent,
    Candidate,
    CandidateStatus,
    Image,
    ImageStatus,
    Review,
    ReviewClaim,
    image_status,
)
from annotation.questions import services as question_services
from annotation.review import services
from core.errors import Conflict, InvalidInput, NotAllowed, NotFound

pytestmark = pytest.mark.django_db


def review(user, candidate, decision, text=""):
    return services.review_submit(
        user=user, candidate_id=candidate.pk, decision=decision, revised_text=text
    )


def status_of(candidate) -> str:
    candidate.refresh_from_db()
    return candidate.status


# --- resolution after two reviews -----------------------------------------------------------


def test_accept_and_accept_accepts(alice, bob, make_image):
    _, (c,) = make_image()
    review(alice, c, "accept")
    assert status_of(c) == CandidateStatus.OPEN
    review(bob, c, "accept")
    assert status_of(c) == CandidateStatus.ACCEPTED
    assert c.resolved_at is not None


def test_discard_and_discard_discards(alice, bob, make_image):
    _, (c,) = make_image()
    review(alice, c, "discard")
    review(bob, c, "discard")
    assert status_of(c) == CandidateStatus.DISCARDED


def test_identical_revisions_ignoring_case_and_spacing_make_a_child(alice, bob, make_image):
    _, (c,) = make_image(texts=["What is this dish?"])
    review(alice, c, "revise", "What is this dish, and how is it cooked?")
    review(bob, c, "revise", "  what is this  dish, and how is it COOKED? ")
    assert status_of(c) == CandidateStatus.REVISED
    (child,) = c.children.all()
    assert child.round == c.round + 1
    assert child.text == "What is this dish, and how is it cooked?"
    assert {child.author, child.co_author} == {alice, bob}
    assert child.status == CandidateStatus.OPEN
    assert child.origin == "revision"


@pytest.mark.parametrize(
    ("first", "second"),
    [("accept", "discard"), ("accept", "revise"), ("discard", "revise"), ("revise", "revise")],
)
def test_anything_else_is_disputed(alice, bob, make_image, first, second):
    _, (c,) = make_image()
    review(alice, c, first, "Alice's version?" if first == "revise" else "")
    review(bob, c, second, "Bob's different version?" if second == "revise" else "")
    assert status_of(c) == CandidateStatus.DISPUTED
    assert not c.children.exists()


def test_status_changes_are_audited(alice, bob, make_image):
    _, (c,) = make_image()
    review(alice, c, "accept")
    review(bob, c, "discard")
    event = AuditEvent.objects.get(candidate=c, action="candidate.status")
    assert event.actor == bob
    assert event.data == {"from": "open", "to": "disputed", "reason": "accept against discard"}


# --- refusals -------------------------------------------------------------------------------


def test_only_annotators_review(carol, mallory, root, make_image):
    _, (c,) = make_image()
    for person in (carol, mallory, root):
        with pytest.raises(NotAllowed):
            review(person, c, "accept")
    assert not Review.objects.exists()


def test_never_twice(alice, make_image):
    _, (c,) = make_image()
    review(alice, c, "accept")
    with pytest.raises(Conflict, match="already"):
        review(alice, c, "discard")
    assert Review.objects.filter(candidate=c).count() == 1


def test_never_a_third_review(alice, bob, erin, make_image):
    _, (c,) = make_image()
    review(alice, c, "accept")
    review(bob, c, "discard")
    with pytest.raises(Conflict):
        review(erin, c, "accept")
    assert Review.objects.filter(candidate=c).count() == 2


def test_never_the_author_nor_the_co_author(alice, bob, erin, make_image):
    _, (c,) = make_image(texts=["What is this?"])
    review(alice, c, "revise", "What is this dish and where does it come from?")
    review(bob, c, "revise", "What is this dish and where does it come from?")
    child = c.children.get()
    for author in (alice, bob):
        with pytest.raises(NotAllowed, match="wrote"):
            review(author, child, "accept")
    review(erin, child, "accept")


def test_revise_needs_text_and_other_decisions_refuse_it(alice, make_image):
    _, (c,) = make_image()
    with pytest.raises(InvalidInput) as missing:
        review(alice, c, "revise", "   ")
    assert missing.value.field == "revised_text"
    with pytest.raises(InvalidInput) as extra:
        review(alice, c, "accept", "Some text")
    assert extra.value.field == "revised_text"
    with pytest.raises(InvalidInput, match="Your revision is the same as the question"):
        review(alice, c, "revise", c.text.upper())
    assert not Review.objects.exists()


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"decision": "maybe"}, "decision"),
        ({"decision": "accept", "reasons": ["nonsense"]}, "reasons"),
        ({"decision": "accept", "reasons": "leading"}, "reasons"),
        ({"decision": "accept", "seconds": -1}, "seconds"),
        ({"decision": "accept", "seconds": "soon"}, "seconds"),
        ({"decision": "accept", "comment": "x" * 5001}, "comment"),
    ],
)
def test_bad_input_names_the_field(alice, make_image, fields, field):
    _, (c,) = make_image()
    with pytest.raises(InvalidInput) as err:
        services.review_submit(user=alice, candidate_id=c.pk, **fields)
    assert err.value.field == field


def test_unknown_candidate(alice):
    with pytest.raises(NotFound):
        services.review_submit(user=alice, candidate_id=999, decision="accept")


def test_reasons_are_kept_in_tag_order(alice, make_image):
    _, (c,) = make_image()
    r = services.review_submit(
        user=alice,
        candidate_id=c.pk,
        decision="discard",
        reasons=["unnatural_wording", "leading", "leading"],
        comment=" hm ",
        seconds=42,
    )
    assert r.reasons == ["leading", "unnatural_wording"]
    assert (r.comment, r.seconds, r.slot) == ("hm", 42, 1)


# --- database constraints (the last line, beneath the code) ---------------------------------


def _raw_review(candidate, user, slot, **extra):
    return Review.objects.create(
        candidate=candidate,
        annotator=user,
        slot=slot,
        decision="accept",
        candidate_author_id=candidate.author_id,
        candidate_co_author_id=candidate.co_author_id,
        **extra,
    )


def test_database_refuses_a_second_review_by_the_same_person(alice, make_image):
    _, (c,) = make_image()
    _raw_review(c, alice, 1)
    with pytest.raises(IntegrityError), transaction.atomic():
        _raw_review(c, alice, 2)


def test_database_refuses_a_third_slot(alice, bob, erin, make_image):
    _, (c,) = make_image()
    _raw_review(c, alice, 1)
    _raw_review(c, bob, 2)
    with pytest.raises(IntegrityError), transaction.atomic():
        _raw_review(c, erin, 2)
    with pytest.raises(IntegrityError), transaction.atomic():
        _raw_review(c, erin, 3)


def test_database_refuses_a_review_by_the_author(alice, make_image):
    _, (c,) = make_image()
    Candidate.objects.filter(pk=c.pk).update(author=alice)
    c.refresh_from_db()
    with pytest.raises(IntegrityError), transaction.atomic():
        _raw_review(c, alice, 1)


def test_database_refuses_revise_without_text(alice, make_image):
    _, (c,) = make_image()
    with pytest.raises(IntegrityError), transaction.atomic():
        Review.objects.create(candidate=c, annotator=alice, slot=1, decision="revise")


# --- claims and leases ----------------------------------------------------------------------


def test_claim_reserves_one_of_two_slots(alice, bob, erin, make_image):
    _, (c1, c2) = make_image(texts=["First question?", "Second question?"])
    assert services.review_claim(user=alice).candidate == c1
    assert services.review_claim(user=bob).candidate == c1
    # Both slots of c1 are reserved: erin gets the next one.
    assert services.review_claim(user=erin).candidate == c2


def test_claiming_again_returns_the_held_claim_and_renews_it(alice, make_image):
    make_image(texts=["First question?", "Second question?"])
    now = timezone.now()
    first = services.review_claim(user=alice, now=now)
    later = services.review_claim(user=alice, now=now + timedelta(minutes=5))
    assert later.candidate == first.candidate
    assert later.expires_at > first.expires_at
    assert ReviewClaim.objects.filter(annotator=alice).count() == 1


def test_abandoned_claim_returns_to_the_pool(alice, bob, erin, make_image, settings):
    _, (c,) = make_image()
    now = timezone.now()
    services.review_claim(user=alice, now=now)
    services.review_claim(user=bob, now=now)
    assert services.review_claim(user=erin, now=now) is None
    later = now + settings.REVIEW_LEASE + timedelta(seconds=1)
    assert services.review_claim(user=erin, now=later).candidate == c


def test_claim_skips_own_text_and_reviewed_and_resolved(alice, bob, erin, make_image):
    _, (mine, reviewed, done, free) = make_image(texts=["A?", "B?", "C?", "D?"])
    Candidate.objects.filter(pk=mine.pk).update(author=alice)
    review(alice, reviewed, "accept")
    review(bob, done, "accept")
    review(erin, done, "accept")
    assert services.review_claim(user=alice).candidate == done.__class__.objects.get(pk=free.pk)


def test_submission_releases_the_claim(alice, make_image):
    _, (c,) = make_image()
    services.review_claim(user=alice)
    review(alice, c, "accept")
    assert not ReviewClaim.objects.exists()


def test_review_without_claim_is_allowed(alice, make_image):
    _, (c,) = make_image()
    review(alice, c, "accept")
    assert Review.objects.filter(candidate=c, annotator=alice).exists()


def test_nothing_to_claim(alice):
    assert services.review_claim(user=alice) is None


def test_non_annotators_cannot_claim(carol, mallory):
    for person in (carol, mallory):
        with pytest.raises(NotAllowed):
            services.review_claim(user=person)


def test_sweep_deletes_expired_claims_only(alice, bob, make_image):
    _, (c,) = make_image()
    now = timezone.now()
    ReviewClaim.objects.create(candidate=c, annotator=alice, expires_at=now - timedelta(1))
    ReviewClaim.objects.create(candidate=c, annotator=bob, expires_at=now + timedelta(1))
    assert services.review_claims_sweep(now=now) == 1
    assert list(ReviewClaim.objects.values_list("annotator__username", flat=True)) == ["bob"]


# --- adjudication ---------------------------------------------------------------------------


@pytest.fixture
def disputed(alice, bob, make_image):
    _, (c,) = make_image(texts=["What is this?"])
    review(alice, c, "accept")
    review(bob, c, "revise", "What is this dish and how is it made?")
    assert status_of(c) == CandidateStatus.DISPUTED
    return c


def adjudicate(user, candidate, decision, text=""):
    return services.adjudication_resolve(
        user=user, candidate_id=candidate.pk, decision=decision, revised_text=text
    )


def test_adjudicator_accepts_when_one_annotator_accepted(carol, disputed):
    adjudicate(carol, disputed, "accept")
    assert status_of(disputed) == CandidateStatus.ACCEPTED
    assert Adjudication.objects.get(candidate=disputed).adjudicator == carol


def test_accept_refused_when_nobody_accepted(alice, bob, carol, make_image):
    _, (c,) = make_image()
    review(alice, c, "discard")
    review(bob, c, "revise", "A better question about this dish?")
    with pytest.raises(InvalidInput, match="neither annotator accepted"):
        adjudicate(carol, c, "accept")
    assert status_of(c) == CandidateStatus.DISPUTED


def test_adjudicator_picks_an_annotators_revision(bob, carol, disputed):
    adjudicate(carol, disputed, "revise", "what is this dish and how is it made?")
    assert status_of(disputed) == CandidateStatus.REVISED
    child = disputed.children.get()
    assert child.author == bob  # credited to the annotator whose revision was picked
    assert child.round == disputed.round + 1
    assert Adjudication.objects.get().chosen_review.annotator == bob


def test_adjudicator_writes_their_own_revision(carol, disputed):
    adjudicate(carol, disputed, "revise", "Which dish is this, and how did its recipe evolve?")
    child = disputed.children.get()
    assert (child.author, child.origin) == (carol, "adjudication")
    assert Adjudication.objects.get().chosen_review is None


def test_adjudicator_discards(carol, disputed):
    adjudicate(carol, disputed, "discard")
    assert status_of(disputed) == CandidateStatus.DISCARDED


def test_adjudication_refusals(alice, bob, carol, disputed, make_image):
    with pytest.raises(NotAllowed):
        adjudicate(alice, disputed, "discard")  # not an adjudicator
    with pytest.raises(InvalidInput) as err:
        adjudicate(carol, disputed, "revise", "")
    assert err.value.field == "revised_text"
    _, (open_one,) = make_image("img-2")
    with pytest.raises(Conflict, match="not disputed"):
        adjudicate(carol, open_one, "discard")
    adjudicate(carol, disputed, "discard")
    with pytest.raises(Conflict):
        adjudicate(carol, disputed, "discard")


def test_adjudicator_never_settles_what_they_reviewed(alice, bob, make_image):
    from django.contrib.auth.models import Group

    _, (c,) = make_image()
    alice.groups.add(Group.objects.get(name="adjudicator"))
    review(alice, c, "accept")
    review(bob, c, "discard")
    alice = type(alice).objects.get(pk=alice.pk)  # fresh role cache
    with pytest.raises(NotAllowed, match="reviewed"):
        adjudicate(alice, c, "accept")
    assert services.adjudication_claim(user=alice) is None


def test_adjudication_claim_is_exclusive(carol, disputed, db):
    from django.contrib.auth.models import Group, User

    dan = User.objects.create_user("dan")
    dan.groups.add(Group.objects.get(name="adjudicator"))
    assert services.adjudication_claim(user=carol).candidate == disputed
    assert services.adjudication_claim(user=dan) is None
    assert services.adjudication_claim(user=carol).candidate == disputed


# --- images and final questions -------------------------------------------------------------


def _status(source_id: str) -> str:
    image = Image.objects.with_counts().get(source_id=source_id)
    return image_status(
        n_pending=image.n_pending, n_accepted=image.n_accepted, has_question=image.has_question
    )


def test_image_needs_candidates_when_everything_is_resolved_and_nothing_accepted(
    alice, bob, root, make_image
):
    _, (c1, c2) = make_image(texts=["A?", "B?"])
    assert _status("img-1") == ImageStatus.IN_REVIEW
    for c in (c1, c2):
        review(alice, c, "discard")
        review(bob, c, "discard")
    assert _status("img-1") == ImageStatus.NEEDS_CANDIDATES
    assert list(Image.objects.needing_candidates()) == [c1.image]


def test_accepted_then_promoted(alice, bob, root, make_image):
    image, (c,) = make_image()
    review(alice, c, "accept")
    review(bob, c, "accept")
    assert _status("img-1") == ImageStatus.AWAITING_GUARD
    question = question_services.final_question_promote(user=root, candidate_id=c.pk)
    assert question.text == c.text and question.promoted_by == root
    assert _status("img-1") == ImageStatus.HAS_QUESTION
    assert AuditEvent.objects.filter(action="question.promote", image=image).exists()


def test_promotion_refusals(alice, bob, root, make_image):
    _, (c, other) = make_image(texts=["A?", "B?"])
    with pytest.raises(NotAllowed):
        question_services.final_question_promote(user=alice, candidate_id=c.pk)
    with pytest.raises(Conflict, match="accepted"):
        question_services.final_question_promote(user=root, candidate_id=c.pk)
    for cand in (c, other):
        review(alice, cand, "accept")
        review(bob, cand, "accept")
    question_services.final_question_promote(user=root, candidate_id=c.pk)
    with pytest.raises(Conflict, match="already"):
        question_services.final_question_promote(user=root, candidate_id=other.pk)


def test_unclaimed_review_cannot_take_a_reserved_slot(alice, bob, erin, make_image):
    _, (c,) = make_image()
    services.review_claim(user=alice)
    services.review_claim(user=bob)
    with pytest.raises(Conflict, match="no review slot left for you"):
        review(erin, c, "accept")
    review(alice, c, "accept")
    review(bob, c, "discard")  # the claimant's slot was kept for them
    assert status_of(c) == CandidateStatus.DISPUTED


def test_unclaimed_review_takes_a_free_slot(alice, bob, erin, make_image):
    _, (c,) = make_image()
    services.review_claim(user=alice)
    review(erin, c, "accept")  # one slot reserved by alice, one free
    review(alice, c, "accept")
    assert status_of(c) == CandidateStatus.ACCEPTED
