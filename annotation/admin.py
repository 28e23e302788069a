"""Django's admin, for looking things up. Decisions are records: read-only here."""

from django.contrib import admin

from core.admin import ReadOnly

from .models import (
    AuditEvent,
    Candidate,
    Domain,
    DomainMapping,
    FinalQuestion,
    Image,
    ImportBatch,
    Review,
)


@admin.register(Image)
class ImageAdmin(ReadOnly):
    list_display = ("source_id", "entity", "entity_confirmed", "domain", "popularity", "is_demo")
    search_fields = ("source_id", "entity")
    list_filter = ("domain", "popularity", "is_demo")


@admin.register(Candidate)
class CandidateAdmin(ReadOnly):
    list_display = ("id", "image", "round", "status", "origin", "text")
    list_filter = ("status", "origin", "round")
    search_fields = ("text", "image__source_id")


@admin.register(Review)
class ReviewAdmin(ReadOnly):
    list_display = ("id", "candidate", "annotator", "decision", "created_at")
    list_filter = ("decision",)


@admin.register(FinalQuestion)
class FinalQuestionAdmin(ReadOnly):
    list_display = ("image", "text", "method", "promoted_by", "created_at")


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnly):
    list_display = ("at", "actor", "action", "candidate", "image")
    list_filter = ("action",)
    # Django joins only non-null foreign keys by itself; these three are nullable.
    list_select_related = ("actor", "candidate", "image")


admin.site.register(ImportBatch, ReadOnly)


@admin.register(Domain)
class DomainAdmin(admin.ModelAdmin):
    """The one list of the benchmark's domains: every import maps to it or refuses the row."""

    list_display = ("name",)
    search_fields = ("name",)


@admin.register(DomainMapping)
class DomainMappingAdmin(admin.ModelAdmin):
    """Which CRAG-MM domain labels become which benchmark domain (empty: left out); the import's
    dry run shows the table as it applies."""

    list_display = ("label", "domain")
    list_editable = ("domain",)
    search_fields = ("label", "domain")


from .training import admin as training_admin  # noqa: E402, F401  (gold items, audits)
