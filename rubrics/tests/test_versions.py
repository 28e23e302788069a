"""Versioned rubrics, human rounds, edits with optimistic locking, warnings, diffs and
upstream corrections."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from annotation.models import QuestionCorrection
from annotation.questions import services as annotation_services
from core.errors import Conflict, InvalidInput, NotAllowed, NotFound
from rubrics import services
from rubrics.compiler import MetaRubricInvalid
from rubrics.models import CheckEdit, Origin, RevisionClaim, RubricVersion, Stage

pytestmark = pytest.mark.django_db


@pytest.fixture
def refined(question, meta):
    """A rubric whose latest version (llm_refined_1) waits for human round 1."""
    q = question()
    services.rubric_version_create(
        question=q, meta_document=meta, stage=Stage.LLM_DRAFT, made_by_model="fake-llm"
    )
    return services.rubric_version_create(
        question=q, meta_document=meta, stage=Stage.LLM_REFINED_1, made_by_model="fake-llm"
    )


def live(version):
    return list(version.checks.filter(deleted_at__isnull=True).order_by("position"))


def test_version_keeps_meta_and_compiled_checks(refined, meta):
    rows = live(refined)
    assert [r.check_id for r in rows][:3] == ["I1", "I2.item1", "I2.item2"]
    assert refined.meta_rubric["entity"] == "Beef bourguignon"
    assert refined.parent.stage == Stage.LLM_DRAFT
    assert {r.origin for r in rows} == {Origin.COMPILED}
    coverage = next(r for r in rows if r.check_id == "I3.base1")
    assert coverage.threshold == 2 and len(coverage.options) == 7
    assert coverage.tier == "answer_critical" and not coverage.secondary


def test_invalid_meta_rubric_creates_nothing(question, meta):
    q = question()
    meta["items"][0]["tier"] = "vital"
    with pytest.raises(MetaRubricInvalid):
        services.rubric_version_create(question=q, meta_document=meta, stage=Stage.IMPORTED)
    assert not RubricVersion.objects.exists()


def test_one_version_per_stage(refined, meta):
    with pytest.raises(Conflict):
        services.rubric_version_create(
            question=refined.rubric.question, meta_document=meta, stage=Stage.LLM_REFINED_1
        )
    with pytest.raises(InvalidInput):
        services.rubric_version_create(
            question=refined.rubric.question, meta_document=meta, stage=Stage.HUMAN_1
        )


# --- rounds ---------------------------------------------------------------------------------


def test_claim_opens_a_human_draft_copying_the_parent(dave, refined):
    draft = services.revision_claim(user=dave)
    assert draft.stage == Stage.HUMAN_1 and draft.parent == refined and draft.frozen_at is None
    assert [(r.check_id, r.text, r.tier) for r in live(draft)] == [
        (r.check_id, r.text, r.tier) for r in live(refined)
    ]
    assert services.revision_claim(user=dave) == draft  # held: the same one again


def test_one_reviser_per_rubric_per_round(dave, refined, db):
    from django.contrib.auth.models import Group, User

    frank = User.objects.create_user("frank")
    frank.groups.add(Group.objects.get(name="rubric_reviser"))
    draft = services.revision_claim(user=dave)
    assert services.revision_claim(user=frank) is None
    with pytest.raises(NotAllowed, match="Another reviser"):
        services.check_edit_text(
            user=frank, version_id=draft.pk, check_pk=live(draft)[0].pk, text="x", revision=0
        )
    # The lease runs out: the round returns to the pool, with dave's draft.
    later = timezone.now() + timedelta(hours=1)
    assert services.revision_claim(user=frank, now=later) == draft


def test_an_edit_renews_only_its_own_or_a_lapsed_claim(dave, refined, db):
    """The edit's one UPDATE of the claim: dave's own is renewed; a lapsed one passes to the
    reviser who edits; a refused edit (a stale revision) renews nothing; with no claim at all,
    the edit makes one."""
    from django.contrib.auth.models import Group, User

    frank = User.objects.create_user("frank")
    frank.groups.add(Group.objects.get(name="rubric_reviser"))
    draft = services.revision_claim(user=dave)
    check = live(draft)[0]
    start = timezone.now()
    services.check_edit_text(
        user=dave, version_id=draft.pk, check_pk=check.pk, text="a", revision=0, now=start
    )
    claim = RevisionClaim.objects.get(version=draft)
    assert claim.reviser == dave and claim.expires_at == start + settings.REVIEW_LEASE
    lapsed = claim.expires_at + timedelta(seconds=1)
    with pytest.raises(services.Stale):
        services.check_edit_text(
            user=frank, version_id=draft.pk, check_pk=check.pk, text="b", revision=0, now=lapsed
        )
    assert RevisionClaim.objects.get(version=draft).reviser == dave  # rolled back with it
    services.check_edit_text(
        user=frank, version_id=draft.pk, check_pk=check.pk, text="b", revision=1, now=lapsed
    )
    claim = RevisionClaim.objects.get(version=draft)
    assert claim.reviser == frank and claim.expires_at == lapsed + settings.REVIEW_LEASE
    with pytest.raises(NotAllowed, match="Another reviser"):
        services.check_edit_text(
            user=dave, version_id=draft.pk, check_pk=check.pk, text="c", revision=2, now=lapsed
        )
    RevisionClaim.objects.filter(version=draft).delete()
    services.check_edit_text(
        user=dave, version_id=draft.pk, check_pk=check.pk, text="c", revision=2, now=lapsed
    )
    assert RevisionClaim.objects.get(version=draft).reviser == dave


def test_only_revisers(alice, root, refined):
    for person in (alice, root):
        with pytest.raises(NotAllowed):
            services.revision_claim(user=person)


def test_nothing_waits_for_a_draft_rubric(dave, question, meta):
    services.rubric_version_create(question=question(), meta_document=meta, stage=Stage.LLM_DRAFT)
    assert services.revision_claim(user=dave) is None  # refinement (an LLM job) comes first


# --- edits ----------------------------------------------------------------------------------


@pytest.fixture
def draft(dave, refined):
    return services.revision_claim(user=dave)


def test_edits_keep_provenance_and_history(dave, draft):
    first, second = live(draft)[:2]
    services.check_edit_text(
        user=dave,
        version_id=draft.pk,
        check_pk=first.pk,
        text="The response names the dish as beef bourguignon.",
        revision=0,
    )
    services.check_retier(
        user=dave, version_id=draft.pk, check_pk=second.pk, tier="valuable", revision=1
    )
    services.check_add(
        user=dave,
        version_id=draft.pk,
        text="Mentions Burgundy.",
        tier="context",
        source="I1",
        after_check_pk=first.pk,
        revision=2,
    )
    services.check_delete(
        user=dave, version_id=draft.pk, check_pk=second.pk, reason="duplicates I1", revision=3
    )
    rows = {r.check_id: r for r in draft.checks.all()}
    assert rows["I1"].origin == Origin.EDITED and rows["I1"].rule == "fact"
    assert rows["H1"].origin == Origin.ADDED and rows["H1"].source == "I1"
    assert rows["H1"].position == 2 and rows["H1"].snippets == []
    assert rows["I2.item1"].deleted_at and rows["I2.item1"].delete_reason == "duplicates I1"
    assert list(CheckEdit.objects.values_list("op", "revision")) == [
        ("edit", 1),
        ("retier", 2),
        ("add", 3),
        ("delete", 4),
    ]
    draft.refresh_from_db()
    assert draft.revision == 4


def test_a_stale_save_is_refused_and_changes_nothing(dave, draft):
    row = live(draft)[0]
    services.check_edit_text(
        user=dave, version_id=draft.pk, check_pk=row.pk, text="First edit.", revision=0
    )
    with pytest.raises(services.Stale) as stale:
        services.check_edit_text(
            user=dave,
            version_id=draft.pk,
            check_pk=row.pk,
            text="Made on the old page.",
            revision=0,
        )
    assert stale.value.current == 1 and stale.value.status == 409
    row.refresh_from_db()
    assert row.text == "First edit."
    assert CheckEdit.objects.count() == 1


def test_edit_refusals(dave, draft):
    row = live(draft)[0]
    for kwargs, field in [({"text": "  "}, "text")]:
        with pytest.raises(InvalidInput) as err:
            services.check_edit_text(
                user=dave, version_id=draft.pk, check_pk=row.pk, revision=0, **kwargs
            )
        assert err.value.field == field
    with pytest.raises(InvalidInput) as err:
        services.check_retier(
            user=dave, version_id=draft.pk, check_pk=row.pk, tier="vital", revision=0
        )
    assert err.value.field == "tier"
    with pytest.raises(InvalidInput) as err:
        services.check_delete(
            user=dave, version_id=draft.pk, check_pk=row.pk, reason="", revision=0
        )
    assert err.value.field == "reason"
    with pytest.raises(InvalidInput) as err:
        services.check_add(
            user=dave, version_id=draft.pk, text="x", tier="context", source="I99", revision=0
        )
    assert err.value.field == "source"
    draft.refresh_from_db()
    assert draft.revision == 0


def test_refusals_after_a_current_revision_undo_its_move(dave, draft):
    """With the page's revision current, one UPDATE moves it on before the claim and the check
    are looked at: each refusal after it leaves the revision, the claim and the rows as they
    were, and the refusals keep their order (a malformed revision is refused after another
    reviser's claim, as before)."""
    from django.contrib.auth.models import Group, User

    row = live(draft)[0]
    before = (row.text, row.tier, row.origin)
    for check_pk, refusal in [(10**9, NotFound), ("abc", InvalidInput)]:
        with pytest.raises(refusal):
            services.check_edit_text(
                user=dave, version_id=draft.pk, check_pk=check_pk, text="x", revision=0
            )
    with pytest.raises(NotFound):
        services.check_edit_text(user=dave, version_id=10**9, check_pk=row.pk, text="x", revision=0)
    frank = User.objects.create_user("frank")
    frank.groups.add(Group.objects.get(name="rubric_reviser"))
    for revision in (0, "abc", 5):
        with pytest.raises(NotAllowed, match="Another reviser"):
            services.check_retier(
                user=frank, version_id=draft.pk, check_pk=row.pk, tier="context", revision=revision
            )
    draft.refresh_from_db()
    assert draft.revision == 0 and not CheckEdit.objects.filter(version=draft).exists()
    assert RevisionClaim.objects.get(version=draft).reviser == dave
    row.refresh_from_db()
    assert (row.text, row.tier, row.origin) == before
    assert (
        services.check_edit_text(
            user=dave, version_id=draft.pk, check_pk=row.pk, text="Now.", revision=0
        ).revision
        == 1
    )


def test_move(dave, draft):
    rows = live(draft)
    services.check_move(
        user=dave, version_id=draft.pk, check_pk=rows[-1].pk, to_position=1, revision=0
    )
    assert [r.check_id for r in live(draft)] == [rows[-1].check_id] + [
        r.check_id for r in rows[:-1]
    ]


def test_complete_freezes_and_moves_the_rubric_on(dave, draft):
    services.revision_complete(user=dave, version_id=draft.pk, revision=0)
    draft.refresh_from_db()
    assert draft.frozen_at is not None and draft.made_by == dave
    assert not RevisionClaim.objects.exists()
    assert services.final_version(draft.rubric) == draft
    assert services.revision_claim(user=dave) is None  # human_2 waits for llm_refined_2
    with pytest.raises(Conflict, match="frozen"):
        services.check_edit_text(
            user=dave, version_id=draft.pk, check_pk=live(draft)[0].pk, text="Too late.", revision=1
        )


def test_parent_versions_never_change(dave, draft, refined):
    before = [(r.text, r.tier, r.deleted_at) for r in refined.checks.order_by("position")]
    row = live(draft)[0]
    services.check_edit_text(
        user=dave, version_id=draft.pk, check_pk=row.pk, text="New.", revision=0
    )
    services.check_delete(
        user=dave, version_id=draft.pk, check_pk=live(draft)[1].pk, reason="r", revision=1
    )
    assert [(r.text, r.tier, r.deleted_at) for r in refined.checks.order_by("position")] == before


# --- warnings and diffs -----------------------------------------------------------------------


def test_warnings(dave, draft):
    rows = {r.check_id: r for r in live(draft)}
    assert services.rubric_warnings(draft.meta_rubric, live(draft)) == []
    rev = 0
    for check_id in ("I2.item2", "I4.step1", "M1"):
        services.check_delete(
            user=dave, version_id=draft.pk, check_pk=rows[check_id].pk, reason="test", revision=rev
        )
        rev += 1
    services.check_retier(
        user=dave, version_id=draft.pk, check_pk=rows["I1"].pk, tier="context", revision=rev
    )
    kinds = {
        w.kind: w for w in services.rubric_warnings(draft.meta_rubric, list(draft.checks.all()))
    }
    assert "red wine" in kinds["strict_list"].message
    assert "step 1" in kinds["sequence"].message
    assert kinds["uncovered"].source == "M1"
    assert kinds["tier"].check_ids == ["I1"]


def test_diff(dave, draft, refined):
    rows = {r.check_id: r for r in live(draft)}
    services.check_edit_text(
        user=dave, version_id=draft.pk, check_pk=rows["I1"].pk, text="Changed.", revision=0
    )
    services.check_retier(
        user=dave, version_id=draft.pk, check_pk=rows["I2.item1"].pk, tier="context", revision=1
    )
    services.check_delete(
        user=dave, version_id=draft.pk, check_pk=rows["I2.item2"].pk, reason="r", revision=2
    )
    services.check_add(user=dave, version_id=draft.pk, text="New one.", tier="valuable", revision=3)
    diff = services.version_diff(list(refined.checks.all()), list(draft.checks.all()))
    assert [r.check_id for r in diff.added] == ["H1"]
    assert [r.check_id for r in diff.removed] == ["I2.item2"]
    assert [new.check_id for _, new in diff.changed] == ["I1"]
    assert [(old.tier, new.tier) for old, new in diff.retiered] == [("answer_critical", "context")]


# --- upstream corrections -------------------------------------------------------------------


def test_corrections_are_kept(root, question):
    q = question()
    annotation_services.question_correct(
        user=root,
        question_id=q.pk,
        field_name="entity",
        value="Boeuf bourguignon",
        reason="the source mislabelled it",
    )
    annotation_services.question_correct(
        user=root,
        question_id=q.pk,
        field_name="text",
        value="Which dish is this?",
        reason="ambiguous referent",
    )
    q.refresh_from_db()
    assert (q.image.entity, q.text) == ("Boeuf bourguignon", "Which dish is this?")
    assert list(QuestionCorrection.objects.values_list("field", "old_value", "new_value")) == [
        ("entity", "Beef bourguignon", "Boeuf bourguignon"),
        ("text", "What is this dish?", "Which dish is this?"),
    ]


def test_drop_and_restore(root, dave, question, meta):
    q = question()
    services.rubric_version_create(question=q, meta_document=meta, stage=Stage.IMPORTED)
    annotation_services.question_drop(user=root, question_id=q.pk, reason="no sound rubric")
    assert services.revision_claim(user=dave) is None  # dropped: nothing to revise
    with pytest.raises(Conflict):
        annotation_services.question_drop(user=root, question_id=q.pk, reason="again")
    annotation_services.question_drop(
        user=root, question_id=q.pk, reason="fixed upstream", restore=True
    )
    assert services.revision_claim(user=dave).stage == Stage.HUMAN_1


def test_corrections_need_an_admin_and_a_reason(alice, root, question):
    q = question()
    with pytest.raises(NotAllowed):
        annotation_services.question_drop(user=alice, question_id=q.pk, reason="x")
    with pytest.raises(InvalidInput):
        annotation_services.question_correct(
            user=root, question_id=q.pk, field_name="entity", value="X", reason=" "
        )


def test_version_refused_for_dropped_questions_open_rounds_and_earlier_stages(
    dave, root, refined, question, meta
):
    q = refined.rubric.question
    with pytest.raises(Conflict, match="later version"):
        services.rubric_version_create(question=q, meta_document=meta, stage=Stage.IMPORTED)
    services.revision_claim(user=dave)
    with pytest.raises(Conflict, match="in progress"):
        services.rubric_version_create(question=q, meta_document=meta, stage=Stage.LLM_REFINED_2)
    other = question("img-2")
    annotation_services.question_drop(user=root, question_id=other.pk, reason="no sound rubric")
    with pytest.raises(Conflict, match="dropped"):
        services.rubric_version_create(question=other, meta_document=meta, stage=Stage.IMPORTED)


def test_move_by_direction_goes_past_the_neighbour_of_its_tier(dave, draft):
    """The neighbour of a move is the next live check of the same tier, found by the service:
    checks of other tiers and deleted ones in between are passed over."""
    rows = live(draft)
    tier = rows[0].tier
    same = [r for r in rows if r.tier == tier]
    assert len(same) >= 2
    first, second = same[0], same[1]
    moved = services.check_move(
        user=dave, version_id=draft.pk, check_pk=first.pk, direction="down", revision=0
    )
    assert moved.revision == 1  # the draft's revision after the edit
    order = [r.pk for r in live(draft) if r.tier == tier]
    assert order.index(first.pk) == order.index(second.pk) + 1
    # the first of its tier going up stays where it is (and still counts as an edit)
    top = [r for r in live(draft) if r.tier == tier][0]
    moved = services.check_move(
        user=dave, version_id=draft.pk, check_pk=top.pk, direction="up", revision=1
    )
    assert moved.revision == 2
    assert [r.pk for r in live(draft) if r.tier == tier][0] == top.pk


def test_move_refuses_an_unknown_direction(dave, draft):
    rows = live(draft)
    with pytest.raises(InvalidInput) as info:
        services.check_move(
            user=dave, version_id=draft.pk, check_pk=rows[0].pk, direction="sideways", revision=0
        )
    assert info.value.field == "direction"
    draft.refresh_from_db()
    assert draft.revision == 0  # nothing written


def test_every_edit_returns_the_new_revision(dave, draft):
    rows = live(draft)
    edited = services.check_edit_text(
        user=dave, version_id=draft.pk, check_pk=rows[0].pk, text="Edited.", revision=0
    )
    assert edited.revision == 1
    added = services.check_add(
        user=dave, version_id=draft.pk, text="Added.", tier="context", revision=1
    )
    assert added.revision == 2
