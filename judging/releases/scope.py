"""Which release a results page, export or API answer scores: `?release=NAME`, or
`?release=draft` for the working draft (the live state); left out, the latest release, or the
working draft while no release has been cut.

Every page that shows scores reads its scope here, in one query (every release, newest first,
which the page's selector lists too), so a page's query count does not grow with the number of
releases. An unknown name is a NotFound naming the `release` input: the API answers it with its
error body, the pages with the site's not-found page.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import NotFound

from ..models import Release
from ..verdicts.scoring import ScoringSettings
from ..verdicts.services import scoring_settings
from .selectors import scope_label

DRAFT_PARAM = "draft"  # ?release=draft: the working draft (a release cannot be chosen by it)


@dataclass(frozen=True)
class Scope:
    """The release chosen (None: the working draft) and every release, for the selector."""

    release: Release | None
    releases: list[Release]

    @property
    def param(self) -> str:
        """The value of `?release=` that names this scope again (links and exports)."""
        return DRAFT_PARAM if self.release is None else self.release.name

    @property
    def label(self) -> str:
        """How a page names it: the release's name, or "working draft"."""
        return scope_label(self.release)

    def scoring(self) -> ScoringSettings:
        """The scoring parameters: those the release froze, or today's for the draft (one
        query)."""
        return scoring_settings() if self.release is None else self.release.scoring_settings()

    def as_dict(self) -> dict | str:
        return release_field(self.release)

    def csv_columns(self) -> dict[str, str]:
        """The columns every CSV export adds to each of its rows: which release it scores."""
        if self.release is None:
            return {"release": DRAFT_PARAM, "release_hash": ""}
        return {"release": self.release.name, "release_hash": self.release.content_hash}

    def file_part(self) -> str:
        """The release in an export's file name."""
        return self.param


def release_field(release: Release | None) -> dict | str:
    """The `release` field of every answer that shows scores (the API, the pages' JSON): the
    release's name and content hash, or "draft"."""
    if release is None:
        return DRAFT_PARAM
    return {"name": release.name, "content_hash": release.content_hash}


def requested_scope(value: str | None) -> Scope:
    """The scope `?release=` names (None or "": the default). Raises NotFound for a name no
    release has. One query."""
    releases = list(Release.objects.order_by("-created_at", "-id"))
    if value is None or value == "":
        return Scope(releases[0] if releases else None, releases)
    if value == DRAFT_PARAM:
        return Scope(None, releases)
    found = next((r for r in releases if r.name == value), None)
    if found is None:
        raise NotFound(
            f"There is no release named {value!r}. Leave the release out for the latest one, "
            f"or give {DRAFT_PARAM!r} for the working draft.",
            "release",
        )
    return Scope(found, releases)
