from django.contrib import admin
from django.utils import timezone

from .models import EvaluatedModel, Judge, Release, ScoringConfig


@admin.register(EvaluatedModel)
class EvaluatedModelAdmin(admin.ModelAdmin):
    """The models the benchmark evaluates. `llm_model` is what a collection job calls; a model
    whose answers are only imported needs none."""

    list_display = ["name", "provider", "model_name", "llm_model"]
    search_fields = ["name", "model_name"]


@admin.register(Judge)
class JudgeAdmin(admin.ModelAdmin):
    """The judges. `llm_model` is what a judge job calls."""

    list_display = ["name", "llm_model"]
    search_fields = ["name"]


@admin.register(ScoringConfig)
class ScoringConfigAdmin(admin.ModelAdmin):
    """The benchmark's one row of scoring settings (lambda, mu, tier weights)."""

    list_display = ["__str__", "updated_by", "updated_at"]
    readonly_fields = ["updated_by", "updated_at"]

    def has_add_permission(self, request) -> bool:
        return not ScoringConfig.objects.exists()

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj, form, change) -> None:
        obj.pk = 1  # one row
        obj.updated_by = request.user
        obj.updated_at = timezone.now()
        super().save_model(request, obj, form, change)


@admin.register(Release)
class ReleaseAdmin(admin.ModelAdmin):
    """Releases, to read: a release never changes. Cut one at /releases/ or with
    `manage.py release create`. Its questions are listed on /releases/<name>/ (thousands of
    rows: no inline here)."""

    list_display = ["name", "created_at", "created_by", "content_hash"]
    readonly_fields = [
        "name",
        "notes",
        "created_by",
        "created_at",
        "content_hash",
        "partial_credit",
        "mu",
        "weight_answer_critical",
        "weight_valuable",
        "weight_context",
        "domains",
    ]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
