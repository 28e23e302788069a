from django.contrib import admin

from .models import LedgerEntry, LLMModel


@admin.register(LLMModel)
class LLMModelAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "provider",
        "model",
        "requests_per_minute",
        "tokens_per_minute",
        "price_input_per_million",
        "price_output_per_million",
        "active",
    ]
    list_filter = ["provider", "active"]


@admin.register(LedgerEntry)
class LedgerEntryAdmin(admin.ModelAdmin):
    list_display = [
        "created_at",
        "stage",
        "model",
        "model_version",
        "outcome",
        "tokens_in",
        "tokens_out",
        "latency_ms",
        "cost",
        "job_id",
    ]
    list_filter = ["outcome", "provider", "stage"]
    search_fields = ["request_hash", "model", "template_name"]

    def has_add_permission(self, request) -> bool:
        return False  # rows are written by the gateway only

    def has_change_permission(self, request, obj=None) -> bool:
        return False
