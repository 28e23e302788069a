from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from knox.models import AuthToken


class Command(BaseCommand):
    help = (
        "Make an API token for a person and print it once (only its hash is stored: it cannot "
        "be shown again), to send as `Authorization: Token <token>`. It lasts API_TOKEN_DAYS "
        "days (--days to choose, 0: until revoked). --revoke ends every token of the person "
        "instead; --list shows how many they have and when each expires. Exit status 2 for "
        "an unknown or inactive person."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--days", type=int, help="days the token lasts (0: until revoked)")
        action = parser.add_mutually_exclusive_group()
        action.add_argument("--revoke", action="store_true", help="end every token of theirs")
        action.add_argument(
            "--list", dest="list_tokens", action="store_true", help="their tokens' expiry dates"
        )

    def handle(
        self, *args, username: str, days: int | None, revoke: bool, list_tokens: bool, **opts
    ):
        from datetime import timedelta

        from knox.settings import knox_settings

        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"There is no person named {username!r}.", returncode=2)
        tokens = AuthToken.objects.filter(user=user)
        if revoke:
            with transaction.atomic():
                ended, _ = tokens.delete()
            self.stdout.write(f"{ended} token(s) of {username} revoked.")
            return
        if list_tokens:
            for token in tokens.order_by("created"):
                until = f"until {token.expiry:%Y-%m-%d %H:%M}" if token.expiry else "no expiry"
                self.stdout.write(f"made {token.created:%Y-%m-%d %H:%M}, {until}")
            self.stdout.write(f"{tokens.count()} token(s) of {username}.")
            return
        if not user.is_active:
            raise CommandError(f"{username} is not active: a token would not work.", returncode=2)
        if days is not None and days < 0:
            raise CommandError("--days must be 0 (until revoked) or more.", returncode=2)
        ttl = knox_settings.TOKEN_TTL if days is None else (timedelta(days=days) if days else None)
        token, key = AuthToken.objects.create(user=user, expiry=ttl)
        until = f"until {token.expiry:%Y-%m-%d %H:%M} UTC" if token.expiry else "until revoked"
        self.stderr.write(
            f"An API token for {username}, valid {until}. Store it now: it is not shown again."
        )
        self.stdout.write(key)
