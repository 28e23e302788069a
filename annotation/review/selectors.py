"""What an annotator's pages read about their own work: today's start, done today and waiting."""

from __future__ import annotations

from django.utils import timezone

from ..models import (
    Candidate,
    Review,
)


def review_progress(user) -> dict:
    return {
        "done_today": Review.objects.filter(annotator=user, created_at__gte=today_start()).count(),
        # "waiting" is what this person can be given now; "held", open candidates whose two
        # review slots other people hold (counted apart, so that "Nothing to review" never
        # stands beside "Waiting: 1").
        **Candidate.objects.waiting_counts(user),
    }


def today_start():
    return timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
