"""Draw the audits that are due now, as opening /audit/ or /rubrics/audit/ does: for a cron
job, so that audits wait before anyone opens the pages."""

from django.core.management.base import BaseCommand

from annotation.models import ReviewAudit, RoundAudit
from annotation.training import audits


class Command(BaseCommand):
    help = (
        "Draw each annotator's due share of resolved reviews (the review audit rate) and each "
        "reviser's due share of completed human rounds (the round audit rate), as the audit "
        "pages do when opened; print how many were drawn and how many wait for a verdict. "
        "Drawing again draws only what has become due since."
    )

    def handle(self, *args, **options) -> None:
        reviews = audits.review_audits_draw()
        rounds = audits.round_audits_draw()
        waiting_reviews = ReviewAudit.objects.filter(verdict="").count()
        waiting_rounds = RoundAudit.objects.filter(verdict="").count()
        self.stdout.write(
            f"Drew {reviews} review audit(s) and {rounds} round audit(s); waiting for a "
            f"verdict: {waiting_reviews} review audit(s), {waiting_rounds} round audit(s)."
        )
