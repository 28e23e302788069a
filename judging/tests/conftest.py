import pytest
from django.utils import timezone


def make_question(
    source_id: str,
    *,
    domain: str = "food",
    popularity: str = "head",
    tiers: tuple[str, ...] = ("answer_critical", "valuable", "context"),
):
    """A final question with a frozen rubric version whose checks have the given tiers."""
    from annotation.models import Candidate, CandidateStatus, FinalQuestion, Image
    from rubrics.models import Rubric, RubricVersion

    image = Image.objects.create(
        source_id=source_id,
        file=f"images/{source_id}.png",
        entity="Beef bourguignon",
        domain=domain,
        popularity=popularity,
    )
    candidate = Candidate.objects.create(
        image=image, text="What is this dish?", origin="import", status=CandidateStatus.ACCEPTED
    )
    question = FinalQuestion.objects.create(
        image=image, candidate=candidate, text=candidate.text, method="manual"
    )
    rubric = Rubric.objects.create(question=question)
    version = RubricVersion.objects.create(
        rubric=rubric, stage="imported", meta_rubric={}, frozen_at=timezone.now()
    )
    add_checks(version, tiers)
    return question


def add_checks(version, tiers, *, texts=None):
    from rubrics.models import RubricCheck

    return [
        RubricCheck.objects.create(
            version=version,
            position=i,
            check_id=f"C{i}",
            kind="fact",
            tier=tier,
            text=(texts or {}).get(i, f"check {i}"),
        )
        for i, tier in enumerate(tiers)
    ]


def final_checks(question):
    from rubrics.services import final_version

    return list(final_version(question.rubric).checks.filter(deleted_at__isnull=True))


@pytest.fixture
def judge(db):
    from judging.models import Judge

    return Judge.objects.create(name="gemini-judge")


@pytest.fixture
def respond(db):
    from judging.models import EvaluatedModel, Response

    def make(
        question,
        model: str = "model-a",
        setting: str = "multimodal",
        text: str = "It is beef bourguignon.",
    ):
        m, _ = EvaluatedModel.objects.get_or_create(name=model)
        return Response.objects.create(model=m, question=question, setting=setting, text=text)

    return make
