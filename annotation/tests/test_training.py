"""Gold items, training and audits, in the services: gold never counts as one of a
candidate's two reviews, the training gate, the audit draw's rate, nobody audits their own
work."""

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from annotation.models import (
    AuditEvent,
    CandidateStatus,
    FinalQuestion,
    GoldReview,
    QualityConfig,
    Review,
    ReviewAudit,
    RoundAudit,
    TrainingState,
)
from annotation.questions import services as question_services
from annotation.review import services
from annotation.tests.quality import GOLD_NOTE, make_gold, set_rates
from annotation.training import audits, gold
from core.errors import Conflict, InvalidInput, NotAllowed

pytestmark = pytest.mark.django_db


# --- gold items -------------------------------------------------------------------------------


def test_a_gold_review_is_recorded_apart_and_never_fills_a_slot(make_image, root, alice, bob):
    image, (real,) = make_image()
    item = make_gold(root, image, decision="discard", reasons=["leading"])
    set_rates(gold_rate=1.0)
    claimed = services.review_claim(user=alice)
    assert claimed.candidate.pk == item.candidate_id  # rate 1: the gold item first
    answer = services.review_submit(user=alice, candidate_id=item.candidate_id, decision="accept")
    assert isinstance(answer, GoldReview) and not answer.agrees
    assert answer.feedback.note == GOLD_NOTE
    assert not Review.objects.exists()
    # Any number may answer it (each once it is drawn for them), and it stays gold: no
    # adjudication, no promotion.
    assert services.review_claim(user=bob).candidate.pk == item.candidate_id
    services.review_submit(user=bob, candidate_id=item.candidate_id, decision="discard")
    erin2 = _annotator("erin2")
    assert services.review_claim(user=erin2).candidate.pk == item.candidate_id
    services.review_submit(
        user=erin2,
        candidate_id=item.candidate_id,
        decision="revise",
        revised_text="What dish is this?",
    )
    item.candidate.refresh_from_db()
    assert item.candidate.status == CandidateStatus.GOLD
    assert GoldReview.objects.filter(gold=item).count() == 3
    with pytest.raises(Conflict):
        question_services.final_question_promote(user=root, candidate_id=item.candidate_id)
    assert not FinalQuestion.objects.exists()
    # The real candidate still takes exactly its own two reviews.
    services.review_submit(user=alice, candidate_id=real.pk, decision="accept")
    services.review_submit(user=bob, candidate_id=real.pk, decision="accept")
    real.refresh_from_db()
    assert real.status == CandidateStatus.ACCEPTED
    assert list(real.reviews.values_list("slot", flat=True)) == [1, 2]


def test_a_gold_item_is_answered_once_and_never_shown_again(make_image, root, alice):
    image, _ = make_image()
    item = make_gold(root, image)
    set_rates(gold_rate=1.0)
    assert services.review_claim(user=alice).candidate.pk == item.candidate_id
    services.review_submit(user=alice, candidate_id=item.candidate_id, decision="discard")
    with pytest.raises(Conflict):
        services.review_submit(user=alice, candidate_id=item.candidate_id, decision="discard")
    assert services.review_claim(user=alice).candidate.status == CandidateStatus.OPEN


def test_gold_is_mixed_in_at_the_rate_and_only_among_real_work(make_image, root, alice):
    image, _ = make_image(texts=[f"Real {i}?" for i in range(3)])
    set_rates(gold_rate=0.0)
    make_gold(root, image)
    assert services.review_claim(user=alice).candidate.status == CandidateStatus.OPEN
    services.review_skip(user=alice, candidate_id=services.review_claim(user=alice).candidate.pk)
    set_rates(gold_rate=1.0)
    assert services.review_claim(user=alice).candidate.status == CandidateStatus.GOLD
    # Someone with no real candidate waiting gets no gold item either: it would stand out.
    for c in image.candidates.filter(status=CandidateStatus.OPEN):
        services.review_submit(user=_annotator("frank"), candidate_id=c.pk, decision="accept")
        services.review_submit(user=_annotator("gina"), candidate_id=c.pk, decision="accept")
    assert services.review_claim(user=_annotator("hank")) is None


def _annotator(name: str) -> User:
    user, _ = User.objects.get_or_create(username=name)
    user.groups.add(Group.objects.get_or_create(name="annotator")[0])
    return user


def test_gold_item_checks_its_input(make_image, root, alice):
    image, _ = make_image()
    with pytest.raises(InvalidInput) as info:
        make_gold(root, image, decision="revise")
    assert info.value.field == "revised_text"
    with pytest.raises(NotAllowed):
        make_gold(alice, image)


def test_gold_import_names_every_bad_line_and_imports_nothing(make_image, root):
    make_image("img-1")
    data = "\n".join(
        [
            '{"image": "img-1", "text": "Q?", "decision": "accept", "note": "fine"}',
            '{"image": "img-9", "text": "Q?", "decision": "accept", "note": "x"}',
            "not json",
            '{"image": "img-1", "text": "Q?", "decision": "maybe", "note": "x"}',
            '{"image": "img-1", "text": "Q?", "decision": "revise", "note": "x"}',
        ]
    )
    with pytest.raises(gold.GoldImportProblems) as info:
        gold.gold_import(user=root, data=data)
    assert [p.line for p in info.value.problems] == [2, 3, 4, 5]
    assert "img-9" in str(info.value.problems[0])
    assert not gold.GoldItem.objects.exists()
    made = gold.gold_import(
        user=root,
        data='{"image": "img-1", "text": "Q?", "decision": "discard", "note": "n",'
        ' "reasons": ["leading"], "training": true}\n',
    )
    assert made[0].training and made[0].reasons == ["leading"]


# --- training ---------------------------------------------------------------------------------


def test_a_trainee_does_the_training_set_first_and_passes_at_the_threshold(make_image, root, alice):
    image, (real,) = make_image()
    set_rates(training_pass_share=0.5, gold_rate=0.0)
    items = [make_gold(root, image, text=f"Train {i}?", training=True) for i in range(4)]
    with pytest.raises(NotAllowed):  # real work is refused until she passes
        services.review_submit(user=alice, candidate_id=real.pk, decision="accept")
    for i, item in enumerate(items):
        claimed = services.review_claim(user=alice)
        assert claimed.candidate.pk == item.candidate_id
        # two of four as the expert (discard): 50 %, the threshold
        services.review_submit(
            user=alice, candidate_id=item.candidate_id, decision="discard" if i < 2 else "accept"
        )
    assert gold.training_standing(alice).passed
    assert services.review_claim(user=alice).candidate.pk == real.pk
    services.review_submit(user=alice, candidate_id=real.pk, decision="accept")


def test_a_trainee_below_the_threshold_is_blocked_until_an_admin_resets(make_image, root, alice):
    image, (real,) = make_image()
    set_rates(training_pass_share=0.8, gold_rate=0.0)
    items = [make_gold(root, image, text=f"Train {i}?", training=True) for i in range(2)]
    for item in items:  # drawn in order, each answered once drawn
        assert services.review_claim(user=alice).candidate.pk == item.candidate_id
        services.review_submit(user=alice, candidate_id=item.candidate_id, decision="accept")
    standing = gold.training_standing(alice)
    assert standing.blocked and standing.agreed == 0
    assert services.review_claim(user=alice) is None
    assert AuditEvent.objects.filter(action="training.failed").exists()
    with pytest.raises(NotAllowed):
        gold.training_reset(user=alice, annotator_id=alice.pk)
    gold.training_pass(user=root, annotator_id=alice.pk)
    assert services.review_claim(user=alice).candidate.pk == real.pk  # she holds a real one
    gold.training_reset(user=root, annotator_id=alice.pk)
    assert TrainingState.objects.get(user=alice).attempt == 2
    # A new attempt: the training set again, the earlier answers kept but not counted.
    for item in items:
        assert services.review_claim(user=alice).candidate.pk == item.candidate_id
        services.review_submit(user=alice, candidate_id=item.candidate_id, decision="discard")
    assert gold.training_standing(alice).passed
    assert GoldReview.objects.filter(annotator=alice).count() == 4


def test_an_admin_can_let_an_experienced_person_through(make_image, root, alice):
    image, (real,) = make_image()
    make_gold(root, image, training=True)
    gold.training_pass(user=root, annotator_id=alice.pk)
    assert services.review_claim(user=alice).candidate.pk == real.pk
    with pytest.raises(Conflict):
        gold.training_pass(user=root, annotator_id=alice.pk)


# --- audits -----------------------------------------------------------------------------------


def resolve(image_maker, first, second, n, prefix="img"):
    reviews = []
    for i in range(n):
        _, (c,) = image_maker(f"{prefix}-{i}", [f"Q {i}?"])
        reviews.append(services.review_submit(user=first, candidate_id=c.pk, decision="accept"))
        services.review_submit(user=second, candidate_id=c.pk, decision="accept")
    return reviews


def test_the_draw_takes_each_annotators_share_of_resolved_reviews(make_image, alice, bob, erin):
    resolve(make_image, alice, bob, 8)
    # An open candidate's review is not resolved work: never drawn.
    _, (open_one,) = make_image("img-open", ["Open?"])
    services.review_submit(user=erin, candidate_id=open_one.pk, decision="accept")
    assert audits.review_audits_draw(rate=0.25) == 4  # 2 of alice's 8, 2 of bob's 8
    for person in (alice, bob):
        assert ReviewAudit.objects.filter(annotator=person).count() == 2
    assert not ReviewAudit.objects.filter(annotator=erin).exists()
    assert audits.review_audits_draw(rate=0.25) == 0  # idempotent: the share is there
    assert audits.due(0.05, 10) == 1 and audits.due(0.05, 9) == 0 and audits.due(0, 50) == 0


def test_nobody_audits_their_own_review_or_one_beside_it(make_image, alice, bob, carol):
    resolve(make_image, alice, bob, 2)
    audits.review_audits_draw(rate=1.0)
    # alice adjudicates too: she may audit neither her reviews nor bob's beside hers
    alice.groups.add(Group.objects.get(name="adjudicator"))
    assert not audits.review_audits_open_to(alice).exists()
    audit = ReviewAudit.objects.filter(annotator=alice).first()
    with pytest.raises(NotAllowed):
        audits.review_audit_give(user=alice, audit_id=audit.pk, verdict="agree")
    assert audits.review_audits_open_to(carol).count() == 4
    with pytest.raises(InvalidInput) as info:  # an overturn says why
        audits.review_audit_give(user=carol, audit_id=audit.pk, verdict="overturn")
    assert info.value.field == "note"
    done = audits.review_audit_give(
        user=carol, audit_id=audit.pk, verdict="overturn", note="Boilerplate question."
    )
    assert done.auditor == carol and done.verdict == "overturn"
    with pytest.raises(Conflict):
        audits.review_audit_give(user=carol, audit_id=audit.pk, verdict="agree")
    with pytest.raises(NotAllowed):
        audits.review_audit_give(user=bob, audit_id=audit.pk, verdict="agree")


def test_rubric_rounds_are_drawn_per_reviser_and_never_audited_by_their_reviser(dave):
    from rubrics.models import Rubric, RubricVersion
    from rubrics.tests.conftest import make_question as question

    other = User.objects.create_user("olga")
    other.groups.add(Group.objects.get_or_create(name="rubric_reviser")[0])
    now = timezone.now()
    for i in range(4):
        rubric = Rubric.objects.create(question=question(f"q-{i}"))
        RubricVersion.objects.create(
            rubric=rubric, stage="human_1", meta_rubric={}, made_by=dave, frozen_at=now
        )
    # An unfinished round is not completed work.
    RubricVersion.objects.create(
        rubric=rubric, stage="human_2", meta_rubric={}, made_by=dave, created_at=now
    )
    assert audits.round_audits_draw(rate=0.5) == 2
    audit = RoundAudit.objects.first()
    assert not audits.round_audits_open_to(dave).exists()
    with pytest.raises(NotAllowed):
        audits.round_audit_give(user=dave, audit_id=audit.pk, verdict="accept")
    with pytest.raises(InvalidInput):
        audits.round_audit_give(user=other, audit_id=audit.pk, verdict="flag")
    flagged = audits.round_audit_give(
        user=other, audit_id=audit.pk, verdict="flag", note="H2 duplicates C3."
    )
    assert flagged.verdict == "flag" and flagged.auditor == other
    assert audits.round_audits_draw(rate=0.5) == 0


def test_import_gold_command_names_the_line_and_exits_2(make_image, tmp_path):
    from django.core.management import CommandError, call_command

    make_image("img-1")
    path = tmp_path / "gold.jsonl"
    path.write_text(
        '{"image": "img-1", "text": "Q?", "decision": "accept", "note": "n"}\n'
        '{"image": "img-1", "text": "Q?", "decision": "accept"}\n'
    )
    with pytest.raises(CommandError) as info:
        call_command("import_gold", str(path))
    assert info.value.returncode == 2 and not gold.GoldItem.objects.exists()
    path.write_text('{"image": "img-1", "text": "Q?", "decision": "accept", "note": "n"}\n')
    call_command("import_gold", str(path))
    assert gold.GoldItem.objects.get().candidate.status == CandidateStatus.GOLD


def test_an_admin_adds_a_gold_item_in_the_admin(client, make_image, root):
    image, _ = make_image()
    root.is_superuser = True  # Django's admin asks for model permissions
    root.save()
    client.force_login(root)
    url = "/admin/annotation/golditem/add/"
    assert client.get(url).status_code == 200
    response = client.post(
        url,
        {
            "image": image.pk,
            "text": "Which dish is this?",
            "origin": "llm",
            "decision": "revise",
            "revised_text": "",
            "note": "Needs the region.",
        },
    )
    assert response.status_code == 200 and not gold.GoldItem.objects.exists()  # revise needs text
    response = client.post(
        url,
        {
            "image": image.pk,
            "text": "Which dish is this?",
            "origin": "llm",
            "decision": "revise",
            "revised_text": "Which Burgundian dish is this?",
            "reasons": ["ambiguous_referent"],
            "note": "Needs the region.",
            "training": "on",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    item = gold.GoldItem.objects.get()
    assert item.training and item.reasons == ["ambiguous_referent"] and item.created_by == root
    assert item.candidate.text == "Which dish is this?"
    change = f"/admin/annotation/golditem/{item.pk}/change/"
    assert client.get(change).status_code == 200
    client.post(change, {"note": "Name the region.", "training": "", "active": "on"})
    item.refresh_from_db()
    assert item.note == "Name the region." and not item.training
    assert item.decision == "revise"  # the expert's decision is not edited
    config_url = "/admin/annotation/qualityconfig/add/"
    values = {
        "gold_rate": "0.2",
        "training_pass_share": "0.9",
        "review_audit_rate": "0.1",
        "round_audit_rate": "0.1",
    }
    assert client.post(config_url, values).status_code == 302
    assert QualityConfig.current().gold_rate == 0.2 and QualityConfig.objects.get().pk == 1
    assert client.post(config_url, values).status_code == 403  # one row: changed, never added
