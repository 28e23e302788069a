from django.apps import AppConfig


class LlmConfig(AppConfig):
    """The LLM gateway: provider clients, the call ledger and its cache, rate limiting.

    It knows nothing of the apps that use it (annotation, rubrics, judging)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "llm"
    verbose_name = "LLM gateway"

    def ready(self) -> None:
        # The demo provider registers itself as llm/providers.py's real ones do; the job
        # system's Celery tasks are registered in every process, since the web sends the chunk
        # task by its name (llm/sending.py) and only a worker runs Celery's autodiscovery.
        from . import demo_provider, tasks  # noqa: F401
