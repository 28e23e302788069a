"""axe-core on every page for every demo role, in a real Chromium under the site's own strict
CSP: no critical or serious violation anywhere (the Swagger page, which is not ours, excepted).
The walk also checks that no page logs a console error.

axe is the npm package `axe-core`, vendored under tests/vendor/ with its sha256."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VENDOR = Path(__file__).parent / "vendor"
AXE = VENDOR / "axe-4.14.1.min.js"
SERIOUS = ("critical", "serious")

# Runs axe in the page and returns the critical and serious violations, one line each.
RUN_AXE = """async () => {
  const result = await axe.run(document, {resultTypes: ["violations"]});
  return result.violations
    .filter(v => ["critical", "serious"].includes(v.impact))
    .map(v => `${v.impact} ${v.id}: ${v.help} at ${v.nodes.slice(0, 3)
      .map(n => n.target.join(" ")).join(", ")}`);
}"""


def axe_source() -> str:
    text = AXE.read_text()
    want = (VENDOR / f"{AXE.name}.sha256").read_text().split()[0]
    assert hashlib.sha256(text.encode()).hexdigest() == want, "the vendored axe was changed"
    return text


def demo_pages() -> list[str]:
    from annotation.models import Candidate
    from llm.models import Job
    from rubrics.models import Rubric, RubricVersion

    pages = [
        "/",
        "/review/",
        "/me/",
        "/adjudicate/",
        "/pipeline/",
        "/agreement/",
        "/training/",
        "/audit/",
        "/rubrics/audit/",
        "/import/",
        "/images/",
        "/images/demo-coffee/",
        "/rubrics/",
        f"/rubrics/{Rubric.objects.first().pk}/",
        f"/rubrics/versions/{RubricVersion.objects.order_by('id').first().pk}/",
        "/jobs/",
        "/prompts/",
        "/leaderboard/",
        "/judging/runs/",
        "/judging/spot-checks/",
        "/judging/spot-checks/results/",
        "/judging/spot-checks/quality/",
        "/leaderboard/settings/",
        "/leaderboard/judges/",
        "/leaderboard/questions/",
        "/leaderboard/questions/demo-coffee/",
        "/releases/",
        "/releases/v1.0%20(demo)/",
        "/releases/diff/?a=v1.0%20(demo)&b=draft",
        f"/review/{Candidate.objects.first().pk}/",  # a GET on a POST-only address: 405
        "/no-such-page/",
    ]
    job = Job.objects.order_by("id").first()
    if job is not None:
        pages.append(f"/jobs/{job.pk}/")
    return pages


@pytest.mark.slow  # about 30 s, the longest of make test: it leaves it to CI's PostgreSQL pass
def test_axe_finds_no_serious_violation_on_any_page_for_any_role(browser, live_server, capsys):
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from playwright.sync_api import expect

    call_command("load_demo")
    capsys.readouterr()
    source = axe_source()
    pages = demo_pages()
    found: dict[str, list[str]] = {}
    errors: list[str] = []
    opened: dict[str, int] = {}
    for username in User.objects.order_by("username").values_list("username", flat=True):
        context = browser.new_context(
            base_url=live_server.url, viewport={"width": 1280, "height": 900}
        )
        context.set_default_timeout(10_000)
        page = context.new_page()
        # The refusals (403, 404, 405) are asked for; anything else failing is an error.
        page.on(
            "console",
            lambda msg, who=username: (
                errors.append(f"{who}: {msg.text}")
                if msg.type == "error" and "status of 40" not in msg.text
                else None
            ),
        )
        page.on(
            "response",
            lambda r, who=username: (
                errors.append(f"{who}: {r.status} {r.url}") if r.status >= 500 else None
            ),
        )
        page.goto("/login/")
        page.get_by_label("User name").fill(username)
        page.get_by_label("Password").fill(f"{username}-demo-pass")
        page.get_by_label("Password").press("Enter")
        expect(page.locator(".topbar .logout span")).to_have_text(username)
        refused_once = False
        for url in pages:
            response = page.goto(url)
            if response.status == 403:  # one refusal page per role is enough to check
                if refused_once:
                    continue
                refused_once = True
            page.evaluate(source)
            violations = page.evaluate(RUN_AXE)
            opened[username] = opened.get(username, 0) + (response.status == 200)
            if violations:
                found[f"{username} {url} ({response.status})"] = violations
        context.close()
    assert found == {}, json.dumps(found, indent=1)
    assert errors == []
    # Every role saw its own pages, not only refusals: home and its work (review, adjudicate,
    # rubrics and spot checks), and the admin every admin page (the three release pages among them).
    assert opened == {"admin": 23, "alice": 3, "bob": 3, "carol": 3, "dave": 6, "erin": 3}


def test_axe_runs_under_the_sites_csp(log_in, root):
    """The check above is real: axe runs in a page whose CSP refuses inline scripts, and it
    does report a violation that is there."""
    person = log_in("root")
    page = person.page
    page.goto("/")
    csp = page.evaluate("() => fetch('/').then(r => r.headers.get('content-security-policy'))")
    assert "script-src" in csp and "unsafe-inline" not in re.search(r"script-src[^;]*", csp).group()
    page.evaluate(axe_source())
    page.evaluate(
        "() => { const img = document.createElement('img');"
        " img.src = '/static/favicon.svg'; document.querySelector('main').append(img); }"
    )
    violations = page.evaluate(RUN_AXE)
    assert any("image-alt" in v for v in violations), violations
