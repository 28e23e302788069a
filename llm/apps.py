from django.apps import AppConfig


class LlmConfig(AppConfig):
    """The LLM gateway: provider clients, the call ledger and its cache, rate limiting.

    It knows nothing of the apps that use it (annotation, rubrics, judging)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "llm"
    verbose_name = "LLM gateway"
