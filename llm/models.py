"""The models an admin configures, and the ledger: one row per request sent to a provider.

The ledger is also the content-addressed cache: a request whose hash has an `ok` row is answered
from that row without a call (unless the caller asks for a fresh one).
"""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone


class Provider(models.TextChoices):
    GEMINI = "gemini", "Gemini (google-genai)"
    OPENAI = "openai", "OpenAI-compatible (vLLM, Ollama, hosted)"


class Outcome(models.TextChoices):
    OK = "ok"
    INVALID_OUTPUT = "invalid_output"  # the text did not validate against the schema
    RATE_LIMITED = "rate_limited"  # 429 per minute
    QUOTA_EXHAUSTED = "quota_exhausted"  # 429 per day: the job waits for quota
    SERVER_ERROR = "server_error"  # 5xx or a broken connection
    TIMEOUT = "timeout"
    ERROR = "error"  # any other refusal (400, 401, 403, 404): retrying would not help


class LLMModel(models.Model):
    """A model as an admin configures it; `name` is the label that settings and jobs use."""

    name = models.SlugField(max_length=100, unique=True)
    provider = models.CharField(max_length=16, choices=Provider.choices)
    model = models.CharField(max_length=200, help_text="The provider's model name.")
    parameters = models.JSONField(
        default=dict, blank=True, help_text='Generation parameters, e.g. {"temperature": 0.2}.'
    )
    price_input_per_million = models.DecimalField(
        max_digits=10, decimal_places=4, default=Decimal("0"), validators=[MinValueValidator(0)]
    )
    price_output_per_million = models.DecimalField(
        max_digits=10, decimal_places=4, default=Decimal("0"), validators=[MinValueValidator(0)]
    )
    requests_per_minute = models.PositiveIntegerField(default=60, help_text="0: no limit.")
    tokens_per_minute = models.PositiveIntegerField(default=0, help_text="0: no limit.")
    active = models.BooleanField(default=True)

    class Meta:
        verbose_name = "LLM model"
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.provider}: {self.model})"


class LedgerEntry(models.Model):
    """One request sent to a provider (a retry or a repair is a row of its own).

    Every row of one logical call carries the hash of the original request, so the cache finds
    the `ok` row whether the first answer was valid or the repair made it so."""

    job_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    stage = models.CharField(max_length=100)
    provider = models.CharField(max_length=16, choices=Provider.choices)
    model = models.CharField(max_length=200)
    model_version = models.CharField(max_length=200, blank=True)
    template_name = models.CharField(max_length=200, blank=True)
    template_version = models.CharField(max_length=50, blank=True)
    request_hash = models.CharField(max_length=64, db_index=True)
    attempt = models.PositiveSmallIntegerField(default=1)
    is_repair = models.BooleanField(default=False)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    tokens_cached = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=8, default=Decimal("0"))
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    raw_output = models.TextField(blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        verbose_name_plural = "ledger entries"
        indexes = [models.Index(fields=["request_hash", "outcome"], name="llm_ledger_cache")]

    def __str__(self) -> str:
        return f"{self.stage} {self.model} {self.outcome} ({self.created_at:%Y-%m-%d %H:%M})"
