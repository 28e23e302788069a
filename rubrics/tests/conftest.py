from __future__ import annotations

import pytest

from rubrics.tests.test_compiler import document, fact, flexible, insight, process, strict


def sample_meta() -> dict:
    """A meta-rubric with every kind that matters to the workspace: a fact, a strict list, a
    short flexible list with a meta-insight, and a process with an optional step."""
    return document(
        fact("I1"),
        strict("I2"),
        flexible("I3", meta_insights=[insight("M1")]),
        process(
            "I4",
            steps=[("Marinate the beef", True), ("Brown it", True), ("Flambé with brandy", False)],
        ),
    )


@pytest.fixture
def meta() -> dict:
    return sample_meta()


def make_question(source_id: str = "img-1"):
    """A final question, made directly (stage 1 is tested elsewhere)."""
    from annotation.models import Candidate, CandidateStatus, FinalQuestion, Image

    image = Image.objects.create(
        source_id=source_id,
        file=f"images/{source_id}.png",
        entity="Beef bourguignon",
        domain="food",
        popularity="head",
    )
    candidate = Candidate.objects.create(
        image=image, text="What is this dish?", origin="import", status=CandidateStatus.ACCEPTED
    )
    return FinalQuestion.objects.create(
        image=image, candidate=candidate, text=candidate.text, method="manual"
    )


@pytest.fixture
def question(db):
    return make_question
