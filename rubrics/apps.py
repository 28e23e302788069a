from django.apps import AppConfig


class RubricsConfig(AppConfig):
    name = "rubrics"
    verbose_name = "Rubrics"

    def ready(self) -> None:
        # Registers the rubric job kinds, in web processes and workers alike.
        from . import export_jobs, llm_jobs  # noqa: F401
