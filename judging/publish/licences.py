"""Whether a question's photo goes into the published site: decided from the licence the
release recorded for it (its image's import batch: the dataset's licence, e.g. CRAG-MM's
`cc-by-nc-4.0`), never from anything else.

The rule (docs/researchers.md, "Publishing"): the photo is copied, with its licence and source
shown under it, when the licence lets anyone share a verbatim copy:

  - a public-domain dedication: cc0-1.0, pddl, public domain, unlicense;
  - a Creative Commons licence: cc-by, cc-by-sa, cc-by-nd, and their non-commercial forms
    (cc-by-nc, cc-by-nc-sa, cc-by-nc-nd), any version: each allows a verbatim copy with
    attribution (the non-commercial ones, for non-commercial use only, which the site says);
  - a permissive data or software licence: odc-by, cdla-permissive, mit, apache-2.0,
    bsd-2-clause, bsd-3-clause.

Anything else keeps the photo out, and the question's page says why: no licence recorded
(images uploaded without one, the demo's), "unknown", "other", or a name not listed here. A
licence is read as the Hugging Face Hub writes it (lower case, hyphens); case and spaces do not
matter ("CC BY 4.0" is cc-by-4.0).
"""

from __future__ import annotations

import re

PUBLIC_DOMAIN = {"cc0", "cc0-1.0", "pddl", "public-domain", "unlicense"}
PERMISSIVE = {
    "odc-by",
    "cdla-permissive-1.0",
    "cdla-permissive-2.0",
    "mit",
    "apache-2.0",
    "bsd-2-clause",
    "bsd-3-clause",
}
CREATIVE_COMMONS = re.compile(r"cc-by(-nc)?(-sa|-nd)?(-\d\.\d)?")


def normalise(licence: str) -> str:
    return re.sub(r"[\s_]+", "-", licence.strip().lower())


def photo_allowed(licence: str) -> bool:
    name = normalise(licence)
    return bool(name in PUBLIC_DOMAIN or name in PERMISSIVE or CREATIVE_COMMONS.fullmatch(name))


def non_commercial(licence: str) -> bool:
    return "-nc" in normalise(licence)


def withheld_reason(licence: str) -> str:
    """Why a photo is not in the site, in words for its page ("" when it is allowed)."""
    if photo_allowed(licence):
        return ""
    if not licence.strip():
        return "No licence was recorded for this photo, so it is not included."
    return (
        f"The photo's licence ({licence}) is not one that allows sharing a copy, so it is not"
        " included."
    )
