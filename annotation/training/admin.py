"""Django's admin for training and audits: the rates (one row), gold items (added through
the gold service, so each gets its gold candidate), and the records, read-only."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from core.admin import ReadOnly
from core.errors import DomainError

from ..models import (
    REASON_TAGS,
    CandidateOrigin,
    Decision,
    GoldItem,
    GoldReview,
    Image,
    QualityConfig,
    ReviewAudit,
    RoundAudit,
    TrainingState,
)
from . import gold


@admin.register(QualityConfig)
class QualityConfigAdmin(admin.ModelAdmin):
    list_display = (
        "__str__",
        "gold_rate",
        "training_pass_share",
        "review_audit_rate",
        "round_audit_rate",
    )

    def has_add_permission(self, request):
        return not QualityConfig.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        obj.pk = 1  # one row
        super().save_model(request, obj, form, change)


class GoldItemAddForm(forms.ModelForm):
    image = forms.ModelChoiceField(queryset=Image.objects.order_by("source_id"))
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), help_text="the question as annotators see it"
    )
    origin = forms.ChoiceField(
        choices=CandidateOrigin.choices,
        initial=CandidateOrigin.LLM,
        help_text="shown like any candidate's; pick what real ones of its kind have",
    )
    decision = forms.ChoiceField(choices=Decision.choices)
    reasons = forms.MultipleChoiceField(
        choices=REASON_TAGS, required=False, widget=forms.CheckboxSelectMultiple
    )

    class Meta:
        model = GoldItem
        fields = (
            "image",
            "text",
            "origin",
            "decision",
            "revised_text",
            "reasons",
            "note",
            "training",
        )

    def clean(self):
        data = super().clean()
        try:
            self.made = gold.gold_item_create(
                user=self.request_user,
                image_id=data["image"].pk,
                text=data.get("text", ""),
                decision=data.get("decision", ""),
                note=data.get("note", ""),
                revised_text=data.get("revised_text", ""),
                reasons=data.get("reasons") or [],
                training=data.get("training", False),
                origin=data.get("origin", CandidateOrigin.LLM),
            )
        except (DomainError, KeyError) as exc:
            raise ValidationError(getattr(exc, "message", "Fill in every field.")) from exc
        return data


@admin.register(GoldItem)
class GoldItemAdmin(admin.ModelAdmin):
    list_display = ("id", "candidate", "decision", "training", "active", "created_at")
    list_filter = ("training", "active", "decision")
    search_fields = ("candidate__text", "note")
    # Once made, only the note and whether it is drawn (and for training) change.
    readonly_fields = (
        "candidate",
        "decision",
        "revised_text",
        "reasons",
        "created_by",
        "created_at",
    )

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            return type("GoldItemAddForm", (GoldItemAddForm,), {"request_user": request.user})
        kwargs["fields"] = ("note", "training", "active")
        return super().get_form(request, obj, change=change, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
        else:  # made by the service in the form's clean()
            obj.pk = form.made.pk

    def save_related(self, request, form, formsets, change):
        if change:
            super().save_related(request, form, formsets, change)

    def has_delete_permission(self, request, obj=None):
        return False


admin.site.register(GoldReview, ReadOnly)
admin.site.register(TrainingState, ReadOnly)
admin.site.register(ReviewAudit, ReadOnly)
admin.site.register(RoundAudit, ReadOnly)
