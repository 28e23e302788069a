from django.contrib import admin

from .models import LedgerEntry, LLMModel
from .parameters import ALLOWED, allowed_names


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

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "parameters":
            # What each provider takes, where the admin types them (LLMModel.clean checks).
            field.help_text = (
                'Generation settings as a JSON object, e.g. {"temperature": 0.2}. '
                + " ".join(
                    f"{provider}: {', '.join(allowed_names(provider))}." for provider in ALLOWED
                )
                + " Nothing else is taken: where requests go comes from the environment."
            )
        return field


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
