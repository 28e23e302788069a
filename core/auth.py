"""API tokens: django-rest-knox keeps a SHA-512 hash of each, never the token."""

from __future__ import annotations

from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from rest_framework.exceptions import AuthenticationFailed


class TokenAuthentication(KnoxTokenAuthentication):
    """knox's authentication, with a token that is not UTF-8 (an `Authorization: Token é`
    header, as Latin-1) refused as any wrong token is, with 401: knox decodes it unguarded,
    which is a 500."""

    def authenticate_credentials(self, token: bytes):
        try:
            token.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise AuthenticationFailed("Invalid token.") from exc
        return super().authenticate_credentials(token)


class TokenScheme(KnoxTokenScheme):
    """The schema's security scheme for the class above (drf-spectacular's knox extension
    matches knox's class only), under the name the schema has always used."""

    target_class = "core.auth.TokenAuthentication"
    name = "tokenAuth"
