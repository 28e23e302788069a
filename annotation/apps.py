from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Question review"

    def ready(self) -> None:
        # Registers the stage-1 job kinds (entity proposals, generation, guard): web processes
        # launch them and Celery workers run them, and both start Django through here.
        from django.conf import settings
        from PIL import Image

        from .analysis import diversity_jobs  # noqa: F401  (the background analysis)
        from .images import entities  # noqa: F401  (the LLM stages register their kinds)
        from .questions import llm_jobs  # noqa: F401

        # Every Pillow use in the process (imports, the LLM jobs' image parts) refuses an image
        # over this many pixels before decoding it.
        Image.MAX_IMAGE_PIXELS = settings.IMAGE_MAX_PIXELS
