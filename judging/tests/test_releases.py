"""Releases (issue 25, section 1): cutting one, what it freezes, its hash, its immutability, and
its scores from the verdicts that exist."""

import pytest
from django.contrib.auth.models import User
from django.db.models.deletion import ProtectedError
from django.utils import timezone

from judging.leaderboard.board import leaderboard
from judging.models import Release, ReleaseFrozen, ReleaseQuestion, ScoringConfig
from judging.releases.diff import release_diff
from judging.releases.scores import release_board, release_score
from judging.releases.selectors import (
    latest_release,
    release_checks,
    release_questions,
    release_versions,
    scope_questions,
)
from judging.releases.services import (
    ReleaseError,
    ReleaseExists,
    create_release,
    stored_record,
    verify,
)
from judging.tests.conftest import final_checks, make_question
from judging.verdicts.services import verdict_record
from rubrics.models import RubricVersion

pytestmark = pytest.mark.django_db


def _judge_all(judge, response, verdict="meets"):
    for check in final_checks(response.question):
        verdict_record(judge=judge, response=response, check=check, verdict=verdict)


def _human_round(question, *, edit=None, retier=None, drop=None, add=None):
    """A new frozen version of the question's rubric, copied from the final one with changes:
    edit {position: text}, retier {position: tier}, drop [positions], add [(tier, text)]."""
    from rubrics.services import final_version

    old = final_version(question.rubric)
    new = RubricVersion.objects.create(
        rubric=question.rubric, stage="human_1", parent=old, meta_rubric={}
    )
    for check in old.checks.filter(deleted_at__isnull=True):
        p = check.position
        check.pk = None
        check.version = new
        check.text = (edit or {}).get(p, check.text)
        check.tier = (retier or {}).get(p, check.tier)
        if p in (drop or []):
            check.deleted_at = timezone.now()
        check.save()
    for i, (tier, text) in enumerate(add or []):
        new.checks.create(position=100 + i, check_id=f"H{i + 1}", kind="fact", tier=tier, text=text)
    RubricVersion.objects.filter(pk=new.pk).update(frozen_at=timezone.now())
    return new


def test_create_freezes_the_current_state():
    admin = User.objects.create_user("ada", is_staff=True)
    q1 = make_question("q1", domain="food")
    q2 = make_question("q2", domain="art", tiers=("answer_critical",))
    dropped = make_question("q3")
    dropped.dropped_at = timezone.now()
    dropped.save()
    ScoringConfig.objects.create(pk=1, partial_credit=0.4, mu=-1.5)

    release = create_release("v1.0", "first", by=admin)

    assert release.name == "v1.0" and release.notes == "first" and release.created_by == admin
    assert (release.partial_credit, release.mu) == (0.4, -1.5)
    assert release.scoring_settings().weights == (0.6, 0.3, 0.1)
    assert release.domains == ["art", "food"]
    rows = list(release_questions(release))
    assert [r.source_id for r in rows] == ["q1", "q2"]
    assert rows[0].text == "What is this dish?" and rows[0].entity == "Beef bourguignon"
    assert [r.n_checks for r in rows] == [3, 1]
    assert release_versions(release) == {
        q1.pk: q1.rubric.versions.get().pk,
        q2.pk: q2.rubric.versions.get().pk,
    }
    assert release_checks(release).count() == 4
    assert latest_release() == release
    assert release.content_hash.startswith("sha256:") and len(release.content_hash) == 71
    assert verify(release)


def test_hash_is_stable_and_covers_the_content():
    q1 = make_question("q1")
    a = create_release("a")
    b = create_release("b")  # same content, other name: same hash
    assert a.content_hash == b.content_hash
    assert stored_record(a) == stored_record(b)
    _human_round(q1, edit={0: "a reworded check"})
    c = create_release("c")
    assert c.content_hash != a.content_hash
    assert verify(a) and verify(c)


def test_a_release_never_changes():
    q1 = make_question("q1")
    release = create_release("v1")
    release.notes = "changed"
    with pytest.raises(ReleaseFrozen):
        release.save()
    with pytest.raises(ReleaseFrozen):
        release.delete()
    with pytest.raises(ReleaseFrozen):
        Release.objects.filter(pk=release.pk).update(notes="x")
    with pytest.raises(ReleaseFrozen):
        Release.objects.all().delete()
    row = release_questions(release).get()
    row.text = "other"
    with pytest.raises(ReleaseFrozen):
        row.save()
    with pytest.raises(ReleaseFrozen):
        ReleaseQuestion.objects.filter(release=release).update(text="x")
    # what it holds cannot be deleted from under it
    with pytest.raises(ProtectedError):
        RubricVersion.objects.filter(rubric=q1.rubric).delete()
    # a later change of the live state leaves it as it was
    q1.text = "A corrected question?"
    q1.save()
    _human_round(q1, edit={0: "reworded"})
    assert release_questions(release).get().text == "What is this dish?"
    assert verify(release)
    assert Release.objects.get().notes == ""


def test_create_refuses_clearly():
    with pytest.raises(ReleaseError, match="no question to release"):
        create_release("v1")
    make_question("q1")
    with pytest.raises(ReleaseError, match="Give the release a name"):
        create_release("  ")
    with pytest.raises(ReleaseError, match="letters, digits"):
        create_release("v1/beta")
    with pytest.raises(ReleaseError, match="The name is longer than 40 characters"):
        create_release("v" * 41)
    with pytest.raises(ReleaseError, match="The notes are longer than 2,000 characters"):
        create_release("v1", "n" * 2001)
    with pytest.raises(ReleaseError, match="The name may not contain U\\+000A"):
        create_release("v1\nv2")
    create_release("v1")
    with pytest.raises(ReleaseExists, match="A release named v1 exists already") as refused:
        create_release("v1")
    assert refused.value.status == 409 and refused.value.field == "name"
    assert Release.objects.count() == 1


def test_scores_of_an_unchanged_release_match_the_draft(judge, respond):
    questions = [make_question(f"q{i}", tiers=("answer_critical", "valuable")) for i in range(6)]
    for i, question in enumerate(questions):
        _judge_all(judge, respond(question, "model-a"), "meets" if i % 2 else "missing")
        _judge_all(judge, respond(question, "model-b"), "partially_meets")
    release = create_release("v1")
    on_release = release_board(release, judge=judge)
    on_draft = release_board(None, judge=judge)
    draft = leaderboard(judge=judge, setting="multimodal")
    assert [r.as_dict() for r in on_release.board.rows] == [r.as_dict() for r in draft.rows]
    assert [r.as_dict() for r in on_draft.board.rows] == [r.as_dict() for r in draft.rows]
    assert on_release.pending == 0 and on_release.estimate is None
    assert on_release.label == "v1" and on_draft.label == "working draft"
    assert release_score(release, model="model-a", judge=judge).gamut == pytest.approx(50.0)
    assert release_score(release, model="model-c", judge=judge) is None


def test_a_human_round_leaves_the_release_scored_and_the_draft_pending(judge, respond):
    q1 = make_question("q1", tiers=("answer_critical", "valuable"))
    q2 = make_question("q2", tiers=("answer_critical",))
    for question in (q1, q2):
        _judge_all(judge, respond(question, "model-a"))
    release = create_release("v1")
    _human_round(q1, edit={1: "a reworded check"})
    # the release still scores both questions from the verdicts on its versions
    before = release_board(release, judge=judge)
    assert before.pending == 0
    assert before.row("model-a").scored == 2
    # the draft waits on q1 (its new version has no verdicts yet); so does a release cut now
    draft = release_board(None, judge=judge)
    assert draft.pending == 1 and draft.row("model-a").scored == 1
    later = create_release("v2")
    after = release_board(later, judge=judge)
    assert after.pending == 1 and after.row("model-a").pending == 1
    # the judge has no model to call: no estimate, and the note says why
    assert after.estimate is None and "no model to call" in after.estimate_note
    # once judged on the new version, v2 is complete and v1 unchanged
    _judge_all(judge, q1.responses.get())
    assert release_board(later, judge=judge).pending == 0
    assert release_board(release, judge=judge).row("model-a").gamut == 100.0


def test_a_dropped_question_stays_in_the_release(judge, respond):
    q1 = make_question("q1")
    q2 = make_question("q2")
    _judge_all(judge, respond(q1))
    _judge_all(judge, respond(q2), "missing")
    release = create_release("v1")
    q2.dropped_at = timezone.now()
    q2.save()
    assert [q.id for q in scope_questions(release)] == [q1.pk, q2.pk]
    assert [q.id for q in scope_questions(None)] == [q1.pk]
    assert release_board(release, judge=judge).row("model-a").gamut == 50.0
    assert release_board(None, judge=judge).row("model-a").gamut == 100.0


def test_the_estimate_counts_what_waits_on_the_release(respond):
    from judging.models import Judge
    from llm.models import LLMModel

    model = LLMModel.objects.create(name="judge-model", provider="gemini", model="gemini-x")
    judge = Judge.objects.create(name="j", llm_model=model)
    q1 = make_question("q1", tiers=("answer_critical", "valuable"))
    respond(q1)
    release = create_release("v1")
    found = release_board(release, judge=judge)
    assert found.pending == 1
    assert found.estimate is not None and found.estimate.items == 1
    assert found.estimate.calls == 2


def test_diff_questions_and_checks(judge, respond):
    q1 = make_question("q1", tiers=("answer_critical", "valuable", "context"))
    make_question("q2")
    q3 = make_question("q3")
    a = create_release("a")
    _human_round(
        q1, edit={0: "reworded"}, retier={1: "answer_critical"}, drop=[2], add=[("context", "new")]
    )
    q3.dropped_at = timezone.now()
    q3.save()
    make_question("q4")
    diff = release_diff(a, None, scores=False)
    assert diff.label_a == "a" and diff.label_b == "working draft"
    assert diff.added == ["q4"] and diff.dropped == ["q3"]
    assert diff.shared == 2 and diff.unchanged == 1
    (change,) = diff.changed
    assert change.source_id == "q1"
    assert [(c.check_id, c.change) for c in change.checks] == [
        ("C0", "reworded"),
        ("C1", "re-tiered"),
        ("C2", "removed"),
        ("H1", "added"),
    ]
    assert change.checks[0].text_before == "check 0" and change.checks[0].text == "reworded"
    assert change.checks[1].tier_before == "valuable"
    assert diff.totals() == {"added": 1, "removed": 1, "reworded": 1, "re-tiered": 1}
    assert release_diff(a, a, scores=False).changed == []


def test_diff_moves_each_model_with_a_paired_interval(judge, respond):
    questions = [make_question(f"q{i}", tiers=("answer_critical", "valuable")) for i in range(8)]
    for question in questions:
        _judge_all(judge, respond(question, "model-a"))
    a = create_release("a")
    # a round rewords check 1 of every question; model-a now misses it on half of them
    for i, question in enumerate(questions):
        _human_round(question, edit={1: "reworded"})
        response = question.responses.get()
        for check in final_checks(question):
            verdict = "missing" if (check.position == 1 and i % 2) else "meets"
            verdict_record(judge=judge, response=response, check=check, verdict=verdict)
    b = create_release("b")
    diff = release_diff(a, b, settings=["multimodal"])
    (shift,) = diff.shifts
    assert (shift.model, shift.judge, shift.setting) == ("model-a", judge.name, "multimodal")
    assert shift.score_a == 100.0
    # half the questions fall from 1 to 0.6 / (0.6 + 0.3): -100/3 x 1/2 on average
    assert shift.change.n == 8
    assert shift.change.difference == pytest.approx(-100 / 6)
    assert shift.change.low < -100 / 6 < shift.change.high < 0
    assert shift.score_b == pytest.approx(100 - 100 / 6)
    assert diff.as_dict()["models"][0]["change"] == pytest.approx(-100 / 6)
