"""The demo's LLM models (provider `demo`: llm/demo_provider.py), importable without Django so
that `make run` can name them in the environment before Django starts.

A construction stage whose setting names no model uses its demo model, in development only and
only once load_demo has made it (`stage_model_name`): a real model configured for a stage
always wins, and production never falls back. So `make run`, and any `manage.py launch_job` run
beside it, can launch every stage offline without setting anything.
Every name starts with `demo-`, which is how they are labelled wherever a model name shows.
"""

from __future__ import annotations

# setting -> the demo LLM model that `make run` gives it when the environment names none
DEMO_STAGE_MODELS = {
    "LLM_MODEL_GENERATION": "demo-generator",
    "LLM_MODEL_GUARD": "demo-guard",
    "LLM_MODEL_RUBRICS": "demo-rubric-writer",
}
DEMO_ANSWERER = "demo-answerer"  # the LLM model the demo evaluated model calls
DEMO_JUDGE_LLM = "demo-judge-llm"  # the LLM model the demo judge calls
DEMO_EVALUATED_MODEL = "demo-model-live"  # answers collected through the demo provider
DEMO_JUDGE = "demo-judge-live"  # grades through the demo provider
DEMO_DELAY_SECONDS = 0.3


def stage_model_name(setting: str) -> str:
    """The LLM model name a construction stage uses: what its setting names; when it names
    none, in development, the stage's demo model if load_demo made it; else ""."""
    from django.conf import settings

    name = getattr(settings, setting, "") or ""
    if name or settings.PRODUCTION or setting not in DEMO_STAGE_MODELS:
        return name
    from .models import LLMModel, Provider

    demo = DEMO_STAGE_MODELS[setting]
    return demo if LLMModel.objects.filter(name=demo, provider=Provider.DEMO).exists() else ""


def demo_llm_models() -> list[str]:
    """Create the demo LLM models, the demo evaluated model and the demo judge that call them.
    Idempotent: an existing row of the same name is left as it is. Returns what it created."""
    from judging.models import EvaluatedModel, Judge

    from .models import LLMModel, Provider

    created = []
    models = {}
    for name in [*DEMO_STAGE_MODELS.values(), DEMO_ANSWERER, DEMO_JUDGE_LLM]:
        models[name], new = LLMModel.objects.get_or_create(
            name=name,
            defaults={
                "provider": Provider.DEMO,
                # Its own provider model name: the judges' report matches a judge to the model
                # it judges by that name, and the demo judge does not judge itself.
                "model": name,
                "parameters": {"demo_delay_seconds": DEMO_DELAY_SECONDS},
                "requests_per_minute": 0,
            },
        )
        if new:
            created.append(name)
    _, new = EvaluatedModel.objects.get_or_create(
        name=DEMO_EVALUATED_MODEL,
        defaults={
            "provider": "demo",
            "model_name": DEMO_ANSWERER,
            "llm_model": models[DEMO_ANSWERER],
        },
    )
    if new:
        created.append(DEMO_EVALUATED_MODEL)
    _, new = Judge.objects.get_or_create(
        name=DEMO_JUDGE, defaults={"llm_model": models[DEMO_JUDGE_LLM]}
    )
    if new:
        created.append(DEMO_JUDGE)
    return created
