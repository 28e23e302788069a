"""What the job console may launch: a registry the apps fill from their llm_jobs modules, and
the estimate of calls, tokens and cost shown before a launch.

llm knows nothing of the apps (no import of annotation or rubrics): each app registers, per
pipeline stage, how to launch it, how to count what is eligible, how to turn the source ids an
admin types into its own ids, and which model it will use:

    register_launcher("generate", label="Generate candidates (A.1)", kind=GENERATE,
                      launch=..., eligible=..., resolve=..., model=..., calls_per_item=1)

A launcher may also offer a filter: `select(domain=..., state=...)` gives its own ids that match
a domain and/or one of its `states`, and `domains()` the domains to choose from. The filtered
ids then go through `eligible` and `launch` exactly as chosen ids do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings

from .models import Job, LLMModel

# Typical tokens of ONE call of each job kind, (input, output): a rough estimate for the console,
# not a measurement. Input counts the prompt and an inline image (about 260 tokens for Gemini)
# or the question, evidence and rubric sent; output is the structured answer or the grounded
# text. Refine's calls carry the whole rubric and its snippets, hence the larger figures.
TYPICAL_TOKENS: dict[str, tuple[int, int]] = {
    "annotation.propose_entity": (900, 120),
    "annotation.generate": (1_200, 400),
    "annotation.guard": (1_500, 600),
    "rubrics.build": (3_000, 2_500),
    "rubrics.refine": (6_000, 3_000),
}
DEFAULT_TOKENS = (2_000, 1_000)
# An item costs calls_per_item calls, and each structured answer that breaks its schema or the
# stage's rules gets up to LLM_MAX_REPAIRS repair calls (the estimate's upper end counts them
# once per item).
MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Launcher:
    """A stage the console can launch.

    launch(user=..., ids=None | [own ids], fresh=False) -> Job, raising JobError when it
        cannot; `fresh`: the job's calls skip the ledger's cache;
    eligible(ids=None | [own ids]) -> the number of items a launch would create;
    resolve([source ids]) -> ({source id: own id}, [unknown source ids]);
    model() -> the configured LLMModel, raising JobError when there is none to use;
    select(domain=str | None, state=str | None) -> [own ids] matching the filter (optional);
    domains() -> the domains the filter offers; states: the (value, label) it offers.
    """

    key: str
    label: str
    kind: str
    launch: Callable[..., Job]
    eligible: Callable[[list[int] | None], int]
    resolve: Callable[[Sequence[str]], tuple[dict[str, int], list[str]]]
    model: Callable[[], LLMModel]
    calls_per_item: int
    order: int = 0
    scope_noun: str = "items"
    select: Callable[..., list[int]] | None = None
    domains: Callable[[], list[str]] | None = None
    states: tuple[tuple[str, str], ...] = ()

    @property
    def filterable(self) -> bool:
        return self.select is not None


_launchers: dict[str, Launcher] = {}


def register_launcher(
    key: str,
    *,
    label: str,
    kind: str,
    launch: Callable[..., Job],
    eligible: Callable[[list[int] | None], int],
    resolve: Callable[[Sequence[str]], tuple[dict[str, int], list[str]]],
    model: Callable[[], LLMModel],
    calls_per_item: int,
    order: int = 0,
    scope_noun: str = "items",
    select: Callable[..., list[int]] | None = None,
    domains: Callable[[], list[str]] | None = None,
    states: Sequence[tuple[str, str]] = (),
) -> Launcher:
    """Declare a stage the console can launch; registering a key again replaces it. Without
    `select`, the console offers all eligible items or chosen ones; with it, a filter too."""
    if calls_per_item < 1:
        raise ValueError("calls_per_item must be at least 1")
    if (domains is not None or states) and select is None:
        raise ValueError("domains and states filter through select: give select too")
    launcher = Launcher(
        key,
        label,
        kind,
        launch,
        eligible,
        resolve,
        model,
        calls_per_item,
        order,
        scope_noun,
        select,
        domains,
        tuple(states),
    )
    _launchers[key] = launcher
    return launcher


def get_launcher(key: str) -> Launcher | None:
    return _launchers.get(key)


def all_launchers() -> list[Launcher]:
    return sorted(_launchers.values(), key=lambda launcher: (launcher.order, launcher.key))


def parse_ids(text: str) -> list[str]:
    """Source ids typed one per line (blank lines ignored, duplicates kept once, in order)."""
    seen: dict[str, None] = {}
    for line in text.splitlines():
        if line.strip():
            seen.setdefault(line.strip(), None)
    return list(seen)


@dataclass(frozen=True)
class Estimate:
    items: int
    calls_min: int
    calls_max: int
    tokens_in_min: int
    tokens_in_max: int
    tokens_out_min: int
    tokens_out_max: int
    cost_min: Decimal
    cost_max: Decimal
    model: str


def _cost(model: LLMModel, tokens_in: int, tokens_out: int) -> Decimal:
    return (
        tokens_in * model.price_input_per_million + tokens_out * model.price_output_per_million
    ) / MILLION


def estimate(launcher: Launcher, items: int, model: LLMModel) -> Estimate:
    """Calls, tokens and cost of launching `launcher` on `items` items with `model`: a range,
    from no repair to LLM_MAX_REPAIRS repairs per item."""
    per_in, per_out = TYPICAL_TOKENS.get(launcher.kind, DEFAULT_TOKENS)
    calls_min = items * launcher.calls_per_item
    calls_max = items * (launcher.calls_per_item + settings.LLM_MAX_REPAIRS)
    return Estimate(
        items=items,
        calls_min=calls_min,
        calls_max=calls_max,
        tokens_in_min=calls_min * per_in,
        tokens_in_max=calls_max * per_in,
        tokens_out_min=calls_min * per_out,
        tokens_out_max=calls_max * per_out,
        cost_min=_cost(model, calls_min * per_in, calls_min * per_out),
        cost_max=_cost(model, calls_max * per_in, calls_max * per_out),
        model=model.name,
    )


@dataclass(frozen=True)
class Scope:
    """What the admin asked for: every eligible item (ids None), the chosen source ids, or the
    items a filter selects; `error` says why the request cannot be served."""

    ids: list[int] | None  # None: all eligible
    chosen: list[str]
    unknown: list[str]
    domain: str = ""
    state: str = ""
    error: str = ""

    @property
    def filtered(self) -> bool:
        return bool(self.domain or self.state)


def domain_choices(launcher: Launcher) -> list[str]:
    return launcher.domains() if launcher.domains is not None else []


def scope_from(
    launcher: Launcher, *, scope: str, ids_text: str, domain: str = "", state: str = ""
) -> Scope:
    if scope == "filter":
        return _filtered(launcher, domain.strip(), state.strip())
    if scope != "chosen":
        return Scope(ids=None, chosen=[], unknown=[])
    chosen = parse_ids(ids_text)
    found, unknown = launcher.resolve(chosen) if chosen else ({}, [])
    error = "" if chosen else "Type the source ids of the chosen items, one per line."
    return Scope(ids=list(found.values()), chosen=chosen, unknown=unknown, error=error)


def _filtered(launcher: Launcher, domain: str, state: str) -> Scope:
    def refused(error: str) -> Scope:
        return Scope(ids=[], chosen=[], unknown=[], domain=domain, state=state, error=error)

    if launcher.select is None:
        return refused(f"{launcher.label} has no filter: choose all eligible or chosen items.")
    if not domain and not state:
        return refused("Choose a domain, a state, or both.")
    if state and state not in dict(launcher.states):
        return refused(f"Unknown state {state!r} for {launcher.label}.")
    if domain and domain not in domain_choices(launcher):
        return refused(f"Unknown domain {domain!r}.")
    ids = launcher.select(domain=domain or None, state=state or None)
    return Scope(ids=list(ids), chosen=[], unknown=[], domain=domain, state=state)


def scope_error(launcher: Launcher, scope: Scope) -> str:
    """Why a launch or an estimate of `scope` is refused ("" when it is not): the same words
    on the console, over the API and from `launch_job`."""
    if scope.error:
        return scope.error
    if scope.unknown:
        return f"Unknown for {launcher.label} ({len(scope.unknown)}): " + ", ".join(scope.unknown)
    return ""


def scope_estimate(launcher: Launcher, scope: Scope) -> tuple[Estimate, int, int]:
    """(the estimate, source ids matched, of those left out as not eligible) of launching
    `launcher` on `scope`; raises JobError when nothing would be launched or there is no model
    to use. The console, the API and `launch_job` all estimate through this."""
    from .jobs import JobError  # jobs imports the gateway; this module stays light

    error = scope_error(launcher, scope)
    if error:
        raise JobError(error)
    model = launcher.model()
    items = launcher.eligible(scope.ids)
    if not items:
        raise JobError(f"Nothing in this scope is eligible for {launcher.label}.")
    matched = len(scope.ids) if scope.ids is not None else 0
    skipped = matched - items if scope.ids is not None else 0
    return estimate(launcher, items, model), matched, skipped
