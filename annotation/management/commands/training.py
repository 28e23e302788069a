"""Where each annotator stands in training, and an admin's reset or let-through: the /training/
page from the command line."""

import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.training import gold
from annotation.training.views import training_rows
from core import access
from core.errors import DomainError


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


class Command(BaseCommand):
    help = (
        "Without an action: every annotator's standing in training (not started, in training, "
        "passed, failed), attempt, training answers as the expert and accuracy on the gold items "
        "since, as on /training/ (--json for JSON). `reset USERNAME --by ADMIN` starts their "
        "training again (a new attempt; earlier answers kept but not counted); `pass USERNAME "
        "--by ADMIN` lets them start real work. Each change is recorded as ADMIN's. Exit status "
        "2 for an unknown person, someone who is not an annotator or not an admin, or a change "
        "that does not apply (let through twice)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", nargs="?", choices=["reset", "pass"], help="the change")
        parser.add_argument("username", nargs="?", help="the annotator to change")
        parser.add_argument("--by", default="", help="the admin making the change (required)")
        parser.add_argument("--json", action="store_true", help="the standings as JSON")

    def handle(self, *args, action=None, username=None, by="", **options) -> None:
        if action is None:
            self._show(as_json=options["json"])
            return
        if not username:
            raise CommandError(f"{action}: name the annotator (USERNAME).", returncode=2)
        users = get_user_model().objects
        admin = users.filter(username=by).first() if by else None
        if admin is None or not access.is_admin(admin):
            raise CommandError(
                f"--by must name an admin (got {by!r}): the change is recorded as theirs.",
                returncode=2,
            )
        person = users.filter(username=username).first()
        if person is None:
            raise CommandError(f"There is no user {username!r}.", returncode=2)
        change = gold.training_reset if action == "reset" else gold.training_pass
        try:
            state = change(user=admin, annotator_id=person.pk)
        except DomainError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        if action == "reset":
            self.stdout.write(f"{username} starts the training again (attempt {state.attempt}).")
        else:
            self.stdout.write(f"{username} may start real work.")

    def _show(self, *, as_json: bool) -> None:
        rows = training_rows()
        if as_json:
            self.stdout.write(
                json.dumps(
                    [
                        {
                            "username": row["person"].username,
                            "standing": row["standing"].replace(" ", "_"),
                            **{
                                key: row[key]
                                for key in ("attempt", "answered", "agreed", "share")
                                + ("gold_answered", "gold_share")
                            },
                        }
                        for row in rows
                    ],
                    indent=2,
                )
            )
            return
        if not rows:
            self.stdout.write("No annotators.")
            return
        width = max(len(row["person"].username) for row in rows)
        self.stdout.write(
            f"{'annotator':{width}s}  {'standing':12s} attempt  training as the expert  gold"
        )
        for row in rows:
            trained = f"{row['agreed']} of {row['answered']} ({_share(row['share'])})"
            gold_part = f"{_share(row['gold_share'])} of {row['gold_answered']}"
            self.stdout.write(
                f"{row['person'].username:{width}s}  {row['standing']:12s} {row['attempt']:7d}  "
                f"{trained:22s}  {gold_part}"
            )
