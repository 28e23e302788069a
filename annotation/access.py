"""Kept until the in-flight branches are merged: the role checks live in core.access now."""

from core.access import (  # noqa: F401
    ADJUDICATOR,
    ANNOTATOR,
    ROLE_GROUPS,
    RUBRIC_REVISER,
    is_adjudicator,
    is_admin,
    is_annotator,
    is_member,
    roles,
)
