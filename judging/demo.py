"""Demo judging data (written for the demo, no LLM called): two demo models answer the demo
cappuccino question in both settings, and two demo judges grade every check of its final
rubric version through the same service as real verdicts. Every name says "demo"."""

from __future__ import annotations

import hashlib

from django.db import transaction

from annotation.models import FinalQuestion
from rubrics.demo import DEMO_SOURCE_ID
from rubrics.services import final_version

from .models import EvaluatedModel, Judge, Response, Setting
from .verdicts.services import Given, verdicts_record

MODELS = {
    "demo-model-a": "A cappuccino: a shot of espresso topped with steamed milk and a thick layer "
    "of milk foam. The pattern is latte art, a rosetta or heart poured freehand: "
    "the barista steams the milk into microfoam, pours from a height so it "
    "sinks under the crema, then lowers the pitcher and wiggles it. (Demo "
    "answer, written for the demo.)",
    "demo-model-b": "This looks like a latte with a design drawn on top with a stencil and "
    "cocoa powder. (Demo answer, written for the demo.)",
}
JUDGES = ("demo-judge-strict", "demo-judge-lenient")
VERDICTS = ("meets", "partially_meets", "missing", "contradicts")


def _verdict(judge: str, model: str, setting: str, check_id: str) -> str:
    """A fixed, varied verdict: model a mostly meets, model b mostly misses or contradicts;
    the lenient judge grades one step kinder; text-only answers a little better."""
    digest = int(hashlib.sha256(f"{model}|{setting}|{check_id}".encode()).hexdigest(), 16)
    base = (0 if model.endswith("a") else 2) + digest % 2
    if setting == Setting.TEXT_ONLY and digest % 3 == 0:
        base -= 1
    if judge.endswith("lenient"):
        base -= 1
    return VERDICTS[max(0, min(3, base))]


@transaction.atomic
def demo_judging() -> bool:
    """Idempotent: nothing when a demo judge exists or the demo question has no final rubric."""
    if Judge.objects.filter(name__in=JUDGES).exists():
        return False
    question = FinalQuestion.objects.filter(image__source_id=DEMO_SOURCE_ID).first()
    version = final_version(question.rubric) if question is not None else None
    if version is None:
        return False
    checks = list(version.checks.filter(deleted_at__isnull=True).order_by("position"))
    judges = [Judge.objects.create(name=name) for name in JUDGES]
    for name, text in MODELS.items():
        model = EvaluatedModel.objects.create(name=name, provider="demo data")
        for setting in Setting.values:
            response = Response.objects.create(
                model=model,
                question=question,
                setting=setting,
                text=text,
                model_version="demo data",
            )
            for judge in judges:
                verdicts_record(
                    judge=judge,
                    response=response,
                    template_version="demo",
                    given=[
                        Given(
                            check.pk,
                            _verdict(judge.name, name, setting, check.check_id),
                            "Demo rationale, written for the demo.",
                            "demo data",
                        )
                        for check in checks
                    ],
                )
    return True


DEMO_RELEASE = "v1.0 (demo)"


def demo_release() -> str | None:
    """The demo release, cut from the demo data once it has a judged question (so the release
    pages show one): its name, or None when it exists already or there is nothing to release.
    Idempotent."""
    from django.contrib.auth.models import User

    from .models import Release
    from .releases.services import ReleaseError, create_release

    if Release.objects.filter(name=DEMO_RELEASE).exists():
        return None
    try:
        create_release(
            DEMO_RELEASE,
            "Demo release, cut by load_demo from the demo data (demo questions, demo rubric).",
            by=User.objects.filter(username="admin").first(),
        )
    except ReleaseError:
        return None
    return DEMO_RELEASE
