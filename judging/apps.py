from django.apps import AppConfig


class JudgingConfig(AppConfig):
    name = "judging"
    verbose_name = "Judging"

    def ready(self) -> None:
        # Registers the collection and judge job kinds, in web processes and workers alike.
        from .runs import llm_batch, llm_jobs  # noqa: F401
