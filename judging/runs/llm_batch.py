"""Judging through Gemini's Batch API (half the price; turnaround up to a day): the
`judging.judge_batch` job kind that `llm_jobs.judge_launch(batch=True)` launches.

An item is a group of responses. Its handler plans each response as the single-call judge does
(skips, copies by key), submits the calls left as inline batches and defers the item
(ItemDeferred: back to pending until the next poll, without using an attempt), keeping the
batches' names as the item's state. Polled again, a batch that is over is ingested: each answer
validated and recorded as a verdict. What is still without a verdict (errors inside the batch,
invalid answers, a batch that failed or expired) is submitted again, up to BATCH_ROUNDS batches
in all, after which it is recorded as failed and the item fails with the reason.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings as django_settings

from llm.batch import BatchRequest, batch_answer, batch_status, batch_submit, split_by_size
from llm.gateway import CallResult, Gateway
from llm.jobs import ItemDeferred, ItemFailed, ItemResult, current_item, register_kind
from llm.models import LLMModel

from ..models import VerdictValue
from .llm_jobs import (
    JUDGE_BATCH,
    Given,
    JudgeReply,
    _Check,
    _given,
    _judge_plan,
    _record_verdicts,
    judge_template,
)

BATCH_ROUNDS = 3


def _batch_requests(
    pairs: list[list[int]], params: dict[str, Any]
) -> tuple[LLMModel, dict[str, BatchRequest], dict[str, Any]]:
    """Plan every response of the group; the requests left to call, keyed response:check."""
    requests: dict[str, BatchRequest] = {}
    template = judge_template(params.get("prompt_version"))
    summary = {"checks": 0, "reused": 0, "already": 0}
    model: LLMModel | None = None
    for response_id, version_id in pairs:
        plan = _judge_plan(response_id, version_id, params)
        model = plan.model
        summary["checks"] += plan.already + plan.reused + len(plan.to_call)
        summary["reused"] += plan.reused
        summary["already"] += plan.already
        for check in plan.to_call:
            key = f"{response_id}:{check.pk}"
            requests[key] = BatchRequest(
                key, (*plan.prefix, template.check(tier=check.tier, text=check.text)), JudgeReply
            )
    if model is None:
        raise ItemFailed("the item has no response to judge")
    return model, requests, summary


def _record_batch(
    params: dict[str, Any], given: dict[int, list[Given]], template_version: str
) -> None:
    for response_id, verdicts in given.items():
        _record_verdicts(
            params=params,
            response_id=response_id,
            given=verdicts,
            template_version=template_version,
        )


async def judge_batch(gateway: Gateway, payload: dict[str, Any]) -> ItemResult | dict[str, Any]:
    context = current_item.get()
    params = context.params
    state = dict(context.state or {})
    template = judge_template(params.get("prompt_version"))
    rounds, names = int(state.get("round", 0)), list(state.get("batches", []))
    calls: list[CallResult] = []
    poll = float(params.get("poll_seconds", django_settings.LLM_BATCH_POLL_SECONDS))
    for _ in range(2):  # ingest what is over, then submit what is left (bounded)
        model, requests, summary = await sync_to_async(_batch_requests)(
            payload["responses"], params
        )
        if not requests:
            summary.update(batches=rounds, calls=sum(not c.cached for c in calls))
            return ItemResult.of_calls(summary, *calls)
        if names:
            statuses = [await batch_status(gateway, model, name) for name in names]
            if not all(status.over for status in statuses):
                raise ItemDeferred(
                    poll,
                    {"round": rounds, "batches": names, "waiting": [s.state for s in statuses]},
                )
            given: dict[int, list[Given]] = {}
            for status in statuses:
                for answer in status.answers:
                    request = requests.get(answer.key)
                    if request is None:
                        continue  # recorded already (a redelivered poll) or unknown
                    call = await batch_answer(
                        gateway,
                        model,
                        request,
                        answer,
                        stage=JUDGE_BATCH,
                        template_name=template.prompt.name,
                        template_version=str(template.prompt.version),
                        job_id=context.job_id,
                    )
                    calls.append(call)
                    if call.ok:  # the rest goes round again
                        response_id, check_pk = (int(x) for x in answer.key.split(":"))
                        given.setdefault(response_id, []).append(
                            _given(_Check(check_pk, "", ""), call)
                        )
            await sync_to_async(_record_batch)(params, given, template.version)
            names = []
            continue
        if rounds >= BATCH_ROUNDS:
            failed: dict[int, list[Given]] = {}
            for key in requests:
                response_id, check_pk = (int(x) for x in key.split(":"))
                failed.setdefault(response_id, []).append(
                    Given(
                        check_pk,
                        VerdictValue.FAILED,
                        f"no verdict after {BATCH_ROUNDS} batches (an error inside each batch, "
                        "an invalid answer, or batches that failed or expired)",
                    )
                )
            await sync_to_async(_record_batch)(params, failed, template.version)
            raise ItemFailed(
                f"{len(requests)} checks got no verdict after {BATCH_ROUNDS} batches", *calls
            )
        groups = split_by_size(list(requests.values()))
        names = [
            await batch_submit(
                gateway,
                model,
                group,
                stage=JUDGE_BATCH,
                display_name=f"job {context.job_id} {context.key} round {rounds + 1} part {n}",
                job_id=context.job_id,
            )
            for n, group in enumerate(groups, 1)
        ]
        # What the answers taken so far cost is counted now; the item stays open.
        raise ItemDeferred(
            poll, {"round": rounds + 1, "batches": names, "requests": len(requests)}, *calls
        )
    raise ItemDeferred(poll, {"round": rounds, "batches": names}, *calls)


register_kind(
    JUDGE_BATCH,
    judge_batch,
    chunk_size=5,
    concurrency=5,
    title="Judge responses through the Batch API",
    item_noun="batch",
)
