"""One check of the workspace's checklist as HTML, written in Python rather than in the
template language: a 60-check page renders it 60 times, and the template engine spent most of
the page's CPU on these few lines (variable lookups, escaping, `with` and `if` nodes). The
markup is the same; every value is escaped here (`escape`), the CSRF field comes in safe.

    {% load checklist %}{% check_item check %}
"""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from annotation.labels import words
from rubrics.compiler import is_web_url

register = template.Library()

TIERS = (
    ("answer_critical", "1", "Answer-critical"),
    ("valuable", "2", "Valuable"),
    ("context", "3", "Context"),
)


def _provenance(check: Any, origin_labels: dict[str, str]) -> str:
    if check.origin == "compiled":
        return f"<code>{escape(check.rule)}</code> of {escape(check.source)}"
    label = escape(origin_labels.get(check.origin, check.origin))
    return f"{label} · {escape(check.source)}" if check.source else label


def _forms(check: Any, check_url: str, csrf: str, revision: Any) -> str:
    hidden = f'{csrf}<input type="hidden" name="revision" value="{escape(revision)}">'
    tiers = "\n".join(
        f'              <button type="submit" name="tier" value="{value}" '
        f'class="small tier-button" data-tier-key="{key}"'
        f"{' disabled' if check.tier == value else ''}><kbd>{key}</kbd> {label}</button>"
        for value, key, label in TIERS
    )
    return f'''
          <form class="edit-text" method="post" action="{check_url}/text/" hx-post="{check_url}/text/" hidden>
            {hidden}
            <textarea name="text" rows="3">{escape(check.text)}</textarea>
            <button type="submit" class="small primary">Save <kbd>Enter</kbd></button> <button type="button" class="small" data-cancel>Cancel <kbd>Esc</kbd></button>
          </form>
          <div class="check-actions">
            <form method="post" action="{check_url}/tier/" hx-post="{check_url}/tier/">
              {hidden}
{tiers}
            </form>
            <form method="post" action="{check_url}/move/" hx-post="{check_url}/move/">
              {hidden}
              <button type="submit" name="direction" value="up" class="small" data-move="up" title="Move up ([)">↑</button>
              <button type="submit" name="direction" value="down" class="small" data-move="down" title="Move down (])">↓</button>
            </form>
            <form class="delete" method="post" action="{check_url}/delete/" hx-post="{check_url}/delete/">
              {hidden}
              <input name="reason" placeholder="Why delete it? (Enter)" aria-label="Reason for deleting {escape(check.check_id)}" required>
              <button type="submit" class="small danger">Delete <kbd>x</kbd></button>
            </form>
          </div>'''  # noqa: E501 (markup)


def _snippet_link(snippet: dict) -> str:
    """The snippet's title as a link to its URL; as plain text when the URL is not http(s)."""
    url, label = snippet.get("url", ""), escape(snippet.get("title") or snippet.get("url", ""))
    if not is_web_url(url):
        return label
    return f'<a href="{escape(url)}" rel="noopener noreferrer" target="_blank">{label}</a>'


def _evidence(check: Any) -> str:
    parts = []
    if check.options:
        parts.append(
            f"<p><strong>Options:</strong> {'; '.join(escape(o) for o in check.options)}</p>"
        )
    if check.steps:
        parts.append(
            f"<p><strong>Steps in order:</strong> {' → '.join(escape(s) for s in check.steps)}</p>"
        )
    snippets = getattr(check, "evidence", None) or []
    parts += [f"<p><q>{escape(s.get('text', ''))}</q> — {_snippet_link(s)}</p>" for s in snippets]
    if not snippets:
        parts.append('<p class="small">No evidence snippet cited.</p>')
    return "".join(parts)


@register.simple_tag(takes_context=True)
def check_item(context: template.Context, check: Any) -> SafeString:
    """The check's <li>: head, text, (when editable) its forms, and its evidence."""
    oob = ' hx-swap-oob="true"' if context.get("check_oob") else ""
    head = (
        f'<li class="check origin-{escape(check.origin)}" id="check-{check.pk}" tabindex="0" '
        f'data-check="{escape(check.check_id)}" data-testid="check-{escape(check.check_id)}"'
        f"{oob}>"
    )
    secondary = ' <span class="badge">secondary</span>' if check.secondary else ""
    forms = ""
    if context.get("editable"):
        check_url = escape(f"{context['checks_url']}{check.pk}")
        forms = _forms(
            check, check_url, str(context.get("csrf_input", "")), context.get("revision", "")
        )
    return mark_safe(  # noqa: S308 (every value above is escaped)
        f"""{head}
          <div class="check-head"><code>{escape(check.check_id)}</code> <span class="badge">{escape(words(check.kind))}</span>{secondary}
            <span class="provenance">{_provenance(check, context.get("origin_labels") or {})}</span></div>
          <p class="check-text">{escape(check.text)}</p>{forms}
          <div class="evidence-pop" role="note">
            {_evidence(check)}
          </div>
        </li>"""  # noqa: E501 (markup)
    )
