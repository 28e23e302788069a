from django.apps import AppConfig


class CoreConfig(AppConfig):
    """The neutral layer every app leans on: who may do what, the domain errors and how they
    become HTTP answers, and the checks on every text that enters. It imports no other app."""

    name = "core"
    verbose_name = "GAMUT core"
