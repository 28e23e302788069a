from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Question review"

    def ready(self) -> None:
        # Registers the stage-1 job kinds (generation, guard): web processes launch them and
        # Celery workers run them, and both start Django through here.
        from . import llm_jobs  # noqa: F401
