"""Celery tasks of stage 1: each takes ids (or nothing), loads rows and calls a service."""

from celery import shared_task

from .review import services


@shared_task(name="annotation.tasks.review_claims_sweep")
def review_claims_sweep() -> int:
    """Periodic (beat): delete expired review and adjudication leases."""
    return services.review_claims_sweep()
