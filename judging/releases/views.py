"""The release pages (admins: researchers have admin accounts, as for the leaderboard): the list
with the form to cut one, a release (what it holds, its hash and parameters, each judge's scores
on it with what still waits for verdicts) and the diff of two releases or a release and the
working draft. Each view checks the role, reads its input, calls the releases' services,
renders."""

from __future__ import annotations

from django import forms
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from core import access
from rubrics.models import Stage

from ..models import RELEASE_NAME_MAX, RELEASE_NOTES_MAX, Judge, Release, Setting
from .diff import release_diff
from .scores import release_board
from .selectors import release_named, releases
from .services import ReleaseError, create_release

DRAFT_WORD = "draft"
ADMINS = access.role_required(access.ADMIN, message="Only admins read and cut releases.")


class CutForm(forms.Form):
    """The fields' limits are the model's, held by the browser (maxlength, with the page's
    counter) and by create_release, whose refusal names the field as the page does."""

    name = forms.CharField(
        widget=forms.TextInput(attrs={"maxlength": RELEASE_NAME_MAX}),
        label="Name (letters, digits, spaces and . _ - + ( ), for example v1.0)",
    )
    notes = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "maxlength": RELEASE_NOTES_MAX}),
        label="Notes (optional)",
    )


def _list(request: HttpRequest, form: CutForm, status: int = 200) -> HttpResponse:
    return render(
        request,
        "judging/releases/list.html",
        {"releases": list(releases().select_related("created_by")), "form": form},
        status=status,
    )


@ADMINS
@require_GET
def releases_page(request: HttpRequest) -> HttpResponse:
    return _list(request, CutForm())


@ADMINS
@require_POST
def release_cut(request: HttpRequest) -> HttpResponse:
    """Cut a release; a refusal shows the form again with what was typed and why."""
    form = CutForm(request.POST)
    if form.is_valid():
        try:
            release = create_release(
                form.cleaned_data["name"], form.cleaned_data["notes"], by=request.user
            )
        except ReleaseError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            return redirect("release", name=release.name)
    return _list(request, form, status=400)


def _boards(release: Release | None) -> list:
    return [
        found
        for judge in Judge.objects.select_related("llm_model").order_by("name")
        for setting in Setting.values
        if (found := release_board(release, judge=judge, setting=setting)).board.rows
    ]


@ADMINS
@require_GET
def release_page(request: HttpRequest, name: str) -> HttpResponse:
    release = release_named(name)
    if release is None:
        raise Http404(f"No release named {name}.")
    questions = list(
        release.questions.order_by("source_id").values_list(
            "source_id", "domain", "popularity", "stage", "n_checks", "source", "licence"
        )
    )
    return render(
        request,
        "judging/releases/release.html",
        {
            "release": release,
            "scoring": release.scoring_settings(),
            "questions": questions,
            "checks": sum(q[4] for q in questions),
            "boards": _boards(release),
            "settings": dict(Setting.choices),
            "others": [r.name for r in releases() if r.pk != release.pk],
            "stages": dict(Stage.choices),
        },
    )


def _scope(request: HttpRequest, param: str, default: str) -> tuple[str, Release | None, str]:
    """(the name asked for, the release or None for the draft, a problem in words or "")."""
    name = request.GET.get(param, default)
    if name == DRAFT_WORD:
        return name, None, ""
    found = release_named(name)
    return name, found, "" if found is not None else f"There is no release named {name}."


@ADMINS
@require_GET
def release_diff_page(request: HttpRequest) -> HttpResponse:
    names = [r.name for r in releases()]
    a_name, a, problem_a = _scope(request, "a", names[1] if len(names) > 1 else DRAFT_WORD)
    b_name, b, problem_b = _scope(request, "b", names[0] if len(names) > 1 else DRAFT_WORD)
    problems = [p for p in (problem_a, problem_b) if p]
    if not names:
        problems.append("No release yet: cut one to compare it with the working draft.")
    diff = None if problems else release_diff(a, b)
    return render(
        request,
        "judging/releases/diff.html",
        {
            "names": names,
            "a_name": a_name,
            "b_name": b_name,
            "problems": problems,
            "diff": diff,
            "settings": dict(Setting.choices),
        },
        status=400 if problems and names else 200,
    )
