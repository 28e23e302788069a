"""GAMUT as an inspect_ai task, shipped inside the benchmark's Hugging Face export.

    inspect eval gamut_inspect/task.py --model PROVIDER/MODEL --model-role grader=PROVIDER/JUDGE
    inspect eval gamut_inspect/task.py -T setting=text_only ...

The dataset is the export's Parquet (`data/test-*.parquet` beside this package). The solver asks
each question as the platform does: the photo and the question (`multimodal`), or the question
with the entity named in text instead of the photo (`text_only`). The scorer grades the answer
against every check of the question's rubric with the platform's judge prompt, one check a
call, each answering meets, partially_meets, missing or contradicts; the tier scores and the
Gamut score follow the method (see config.json for lambda, mu and the tier weights in force
when the benchmark was exported). Metrics: the mean Gamut score x100 over questions with its
standard error (each question is one sample, so checks are clustered in their question), and
each tier's mean x100.

Only inspect_ai and pyarrow are needed; this file imports nothing of the platform. The prompts
fence their untrusted texts (the question, the entity, the answer, the check) as the platform
does, with fencing.py beside this file (the platform's llm/fencing.py, copied at export).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageUser, ContentImage, ContentText, Model, get_model
from inspect_ai.scorer import SampleScore, Score, Target, metric, scorer
from inspect_ai.solver import Generate, TaskState, solver

HERE = Path(__file__).resolve().parent
CONFIG = json.loads((HERE / "config.json").read_text(encoding="utf-8"))
VERDICTS = ("meets", "partially_meets", "missing", "contradicts")
TIERS = ("answer_critical", "valuable", "context")
_VERDICT = re.compile(r"\b(partially_meets|meets|missing|contradicts)\b")


def _fencing():
    """fencing.py beside this file, loaded by its path: `inspect eval` loads this file as a
    module of no package, so a relative import would fail."""
    name = "gamut_inspect_fencing"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "fencing.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


render = _fencing().render


def _data_files() -> list[Path]:
    return sorted((HERE.parent / "data").glob("test-*.parquet"))


def _mime(name: str) -> str:
    suffix = Path(name).suffix.lower()
    return {".png": "image/png", ".webp": "image/webp", ".gif": "image/gif"}.get(
        suffix, "image/jpeg"
    )


def _data_uri(image: dict) -> str:
    encoded = base64.b64encode(image["bytes"]).decode()
    return f"data:{_mime(image.get('path') or '')};base64,{encoded}"


def samples(setting: str) -> list[Sample]:
    prompts = CONFIG["answer_prompts"]
    out = []
    for path in _data_files():
        for row in pq.read_table(path).to_pylist():
            text = render(prompts[setting], {"question": row["question"], "entity": row["entity"]})
            content: list[Any] = [ContentText(text=text)]
            photo = _data_uri(row["image"])
            if setting == "multimodal":
                content.insert(0, ContentImage(image=photo))
            out.append(
                Sample(
                    id=row["id"],
                    input=[ChatMessageUser(content=content)],
                    metadata={
                        "question": row["question"],
                        "entity": row["entity"],
                        "domain": row["domain"],
                        "popularity": row["popularity"],
                        "photo": photo,
                        "checks": [
                            {"id": c["id"], "tier": c["tier"], "text": c["text"]}
                            for c in row["checks"]
                        ],
                    },
                )
            )
    return out


@solver
def answer():
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        return await generate(state)

    return solve


def tier_score(counts: dict[str, int], lam: float, mu: float) -> float:
    """s_t = (M + lambda P + mu C) / (M + P + S + |mu| C), the method's tier score."""
    m, p, s, c = (counts.get(v, 0) for v in VERDICTS)
    return (m + lam * p + mu * c) / (m + p + s + abs(mu) * c)


def gamut_score(verdicts: list[tuple[str, str]]) -> tuple[float, dict[str, float]]:
    """The Gamut score of one answer from its (tier, verdict) pairs, and its tier scores:
    the weighted mean of the tier scores over the tiers present, weights renormalised."""
    scoring = CONFIG["scoring"]
    weights = dict(zip(TIERS, scoring["weights"], strict=True))
    by_tier: dict[str, dict[str, int]] = {}
    for tier, verdict in verdicts:
        by_tier.setdefault(tier, {}).setdefault(verdict, 0)
        by_tier[tier][verdict] += 1
    tiers = {t: tier_score(by_tier[t], scoring["lambda"], scoring["mu"]) for t in by_tier}
    total = sum(weights[t] for t in tiers)
    return sum(weights[t] * s for t, s in tiers.items()) / total, tiers


def verdict_of(text: str) -> str | None:
    """The verdict of a judge's reply: its JSON `verdict`, else the first verdict word."""
    try:
        data = json.loads(text.strip().removeprefix("```json").removesuffix("```"))
        if isinstance(data, dict) and data.get("verdict") in VERDICTS:
            return data["verdict"]
    except ValueError:
        pass
    found = _VERDICT.search(text or "")
    return found.group(1) if found else None


def _judge_messages(state: TaskState, check: dict, setting: str) -> list[ChatMessageUser]:
    judge = CONFIG["judge_prompt"]
    meta = state.metadata
    content: list[Any] = [ContentText(text=render(judge["head"], {"question": meta["question"]}))]
    if setting == "multimodal":
        content.append(ContentImage(image=meta["photo"]))
    content.append(ContentText(text=render(judge["middle"], {"response": state.output.completion})))
    tail = {"tier": check["tier"].replace("_", " "), "check": check["text"]}
    content.append(ContentText(text=render(judge["tail"], tail)))
    return [ChatMessageUser(content=content)]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


@metric
def gamut():
    """The mean Gamut score x100 over the questions scored."""

    def compute(scores: list[SampleScore]) -> float:
        values = [s.score.value["gamut"] for s in scores]
        return 100 * _mean([v for v in values if not math.isnan(v)])

    return compute


@metric
def gamut_stderr():
    """Its standard error x100 over questions (checks are clustered in their question)."""

    def compute(scores: list[SampleScore]) -> float:
        values = [s.score.value["gamut"] for s in scores]
        values = [v for v in values if not math.isnan(v)]
        n = len(values)
        if n < 2:
            return float("nan")
        mean = _mean(values)
        return 100 * math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)

    return compute


def _tier_metric(tier: str):
    @metric(name=tier)
    def tier_mean():
        def compute(scores: list[SampleScore]) -> float:
            values = [s.score.value[tier] for s in scores]
            return 100 * _mean([v for v in values if not math.isnan(v)])

        return compute

    return tier_mean()


@scorer(metrics=[gamut(), gamut_stderr(), *[_tier_metric(t) for t in TIERS]])
def rubric(setting: str = "multimodal", judge: str | Model | None = None):
    async def score(state: TaskState, target: Target) -> Score:
        grader = get_model(judge) if judge is not None else get_model(role="grader")
        verdicts: list[tuple[str, str]] = []
        failed = []
        for check in state.metadata["checks"]:
            reply = await grader.generate(_judge_messages(state, check, setting))
            verdict = verdict_of(reply.completion)
            if verdict is None:
                failed.append(check["id"])
            else:
                verdicts.append((check["tier"], verdict))
        nan = float("nan")
        if failed or not verdicts:
            # A check without a verdict is never scored as anything: the question is left out.
            return Score(
                value={"gamut": nan, **dict.fromkeys(TIERS, nan)},
                explanation=f"no verdict for {', '.join(failed) or 'any check'}",
            )
        value, tiers = gamut_score(verdicts)
        return Score(
            value={"gamut": value, **{t: tiers.get(t, nan) for t in TIERS}},
            explanation=", ".join(f"{tier}: {verdict}" for tier, verdict in verdicts),
        )

    return score


@task
def gamut_task(setting: str = "multimodal", judge: str | Model | None = None) -> Task:
    """GAMUT in one setting: multimodal (photo and question) or text_only (entity in text)."""
    if setting not in CONFIG["answer_prompts"]:
        raise ValueError(f"setting must be multimodal or text_only, not {setting!r}")
    return Task(
        dataset=MemoryDataset(samples(setting), name=f"gamut-{setting}"),
        solver=answer(),
        scorer=rubric(setting=setting, judge=judge),
    )
