"""The models an admin configures, and the ledger: one row per request sent to a provider.

The ledger is also the content-addressed cache: a request whose hash has an `ok` row is answered
from that row without a call (unless the caller asks for a fresh one).
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone

from .parameters import parameter_problems


class Provider(models.TextChoices):
    GEMINI = "gemini", "Gemini (google-genai)"
    OPENAI = "openai", "OpenAI-compatible (vLLM, Ollama, hosted)"
    # Canned answers made offline (llm/demo_provider.py), for `make run`; production refuses it.
    DEMO = "demo", "demo (offline canned answers, no model)"


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

    @property
    def is_demo(self) -> bool:
        return self.provider == Provider.DEMO

    def clean(self) -> None:
        # The admin's form: a demo model is refused where real work runs (the gateway refuses
        # to call one there as well, for rows made some other way).
        if self.provider == Provider.DEMO and settings.PRODUCTION:
            raise ValidationError(
                {
                    "provider": "The demo provider is refused in production: "
                    "it answers with canned text, not a model."
                }
            )
        # Generation settings only: the parameters reach the provider's client, where other
        # keys would change where the request (and the key) goes. The gateway checks again.
        problems = parameter_problems(self.provider, self.parameters)
        if problems:
            raise ValidationError({"parameters": problems})


class LedgerEntry(models.Model):
    """One request sent to a provider (a retry or a repair is a row of its own).

    Every row of one logical call carries the hash of the original request, so the cache finds
    the `ok` row whether the first answer was valid or the repair made it so."""

    job_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    # The key of the job item the call was made for (set around each handler by llm/jobs.py):
    # the console's item page lists that item's calls. Empty outside jobs, and on older rows.
    item_key = models.CharField(max_length=255, blank=True)
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
    # What was sent, for admins to read: the system text, the text parts, images as a line with
    # their type, size and sha256 (not their bytes), and a repair's earlier turns.
    prompt = models.TextField(blank=True)
    raw_output = models.TextField(blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        verbose_name_plural = "ledger entries"
        indexes = [
            models.Index(fields=["request_hash", "outcome"], name="llm_ledger_cache"),
            models.Index(fields=["job_id", "item_key"], name="llm_ledger_item"),
        ]

    def __str__(self) -> str:
        return f"{self.stage} {self.model} {self.outcome} ({self.created_at:%Y-%m-%d %H:%M})"


# ---------------------------------------------------------------------------------------------
# Jobs: one row per launch, one row per unit of work (llm/jobs.py runs them).


class JobStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING_FOR_QUOTA = "waiting_for_quota"  # a daily quota is spent: resumed later, not failed
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"  # the job itself could not run (its kind is unknown to the workers)


class ItemStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"  # leased until `lease_until` by the chunk holding `lease_token`
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Job(models.Model):
    """A launch of some kind of work over a scope. The counters are kept by F() updates in the
    transaction that changes an item, so the console reads them without counting rows."""

    kind = models.CharField(max_length=100, db_index=True)
    params = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=20, choices=JobStatus.choices, default=JobStatus.QUEUED, db_index=True
    )
    items_total = models.PositiveIntegerField(default=0)
    items_done = models.PositiveIntegerField(default=0)
    items_failed = models.PositiveIntegerField(default=0)
    # Items not yet done, failed or cancelled: the job is over when this reaches zero.
    items_remaining = models.PositiveIntegerField(default=0)
    tokens_in = models.PositiveBigIntegerField(default=0)
    tokens_out = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=8, default=Decimal("0"))
    launched_by = models.ForeignKey(
        "auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="llm_jobs"
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    resume_at = models.DateTimeField(null=True, blank=True)  # when waiting for quota
    last_error = models.TextField(blank=True)
    # How the job runs, as its chunks last measured it (llm/jobs.py, Pace): chunks at once,
    # requests in flight per chunk, the rate the model's limits allow and its latency. Empty
    # until a chunk has seen answers: the kind's own chunks and concurrency until then.
    pace = models.JSONField(default=dict, blank=True)
    # How far a long item is, for kinds whose one item is the whole work (the benchmark
    # export): {"done", "total", "what"}, written by the handler as it goes. Empty otherwise.
    progress = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk} ({self.status})"


class JobItem(models.Model):
    """One unit of work of a job, keyed (e.g. by the image's source id) so that a redelivered
    task can never make a second item or a second result."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="items")
    key = models.CharField(max_length=255)
    payload = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=ItemStatus.choices, default=ItemStatus.PENDING)
    lease_until = models.DateTimeField(null=True, blank=True)
    # Set by each claim: only the chunk holding the current token may record the outcome.
    lease_token = models.CharField(max_length=32, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True)
    # The handler's result once done; while a deferred item waits (ItemDeferred), its state.
    result = models.JSONField(null=True, blank=True)
    # A deferred item is not claimed before this time (None: claimable at once).
    not_before = models.DateTimeField(null=True, blank=True)
    raw_output = models.TextField(blank=True)  # what the model said, kept when an item fails
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=8, default=Decimal("0"))
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "key"], name="llm_jobitem_key")]
        indexes = [models.Index(fields=["job", "status"], name="llm_jobitem_status")]

    def __str__(self) -> str:
        return f"{self.job_id}/{self.key} ({self.status})"
