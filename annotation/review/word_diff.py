"""A revision against its original, word by word (the adjudication page, the training review)."""

from __future__ import annotations

import difflib

from django.utils.html import escape
from django.utils.safestring import mark_safe


def word_diff(original: str, revised: str):
    """The revision against the original, word by word, as safe HTML with <del> and <ins>."""
    a, b = original.split(), revised.split()
    parts = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            parts.append(escape(" ".join(a[i1:i2])))
        if op in ("delete", "replace"):
            parts.append(f"<del>{escape(' '.join(a[i1:i2]))}</del>")
        if op in ("insert", "replace"):
            parts.append(f"<ins>{escape(' '.join(b[j1:j2]))}</ins>")
    return mark_safe(" ".join(parts))
