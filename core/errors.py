"""The domain errors every service raises. The web views (core.http.refuse), the DRF exception
handler (core.http.api_exception_handler) and the middleware backstop turn them into answers;
no view maps them to a status by hand."""

from __future__ import annotations


class DomainError(Exception):
    """A refused request. `field` names the input at fault, when one is."""

    status = 400

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field

    def body(self) -> dict[str, str]:
        """The error body of the API (core.http.ErrorSerializer)."""
        out = {"detail": self.message}
        if self.field:
            out["field"] = self.field
            # Pages say the field in words; a program reads its name at the start of detail.
            if self.field not in self.message:
                out["detail"] = f"{self.field}: {self.message}"
        return out


class InvalidInput(DomainError):
    status = 400


class NotAllowed(DomainError):
    status = 403


class NotFound(DomainError):
    status = 404


class Conflict(DomainError):
    status = 409


class Unavailable(DomainError):
    """A service the request needs is down (the task queue): 503, nothing written."""

    status = 503


class TooLarge(DomainError):
    """An upload over its cap: 413, refused before it is read."""

    status = 413
