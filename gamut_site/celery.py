import os

from celery import Celery
from celery.signals import setup_logging

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gamut_site.settings")

app = Celery("gamut")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@setup_logging.connect
def use_django_logging(loglevel=None, **_kwargs) -> None:
    """The worker and beat log through settings.LOGGING, as the web does (the same line, with
    the job a task's line belongs to), instead of Celery's own root handler; the command line's
    --loglevel still sets the level."""
    import logging
    from logging.config import dictConfig

    from django.conf import settings

    dictConfig(settings.LOGGING)
    if loglevel:
        logging.getLogger().setLevel(loglevel)
