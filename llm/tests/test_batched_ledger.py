"""The gateway's batched ledger access: the lookups and writes of calls in flight at the same
time share one round trip to the database thread, and each caller gets its own answer."""

from __future__ import annotations

import asyncio

import pytest

from llm.gateway import _Batched

from .conftest import run_async


def test_concurrent_requests_share_one_round_trip_and_get_their_own_results():
    batches: list[list[int]] = []

    def run_many(items: list[int]) -> list[int]:
        batches.append(list(items))
        return [item * 10 for item in items]

    async def main() -> list[int]:
        batched = _Batched(run_many)
        first = await asyncio.gather(*(batched(n) for n in range(20)))
        later = await batched(99)  # alone: a batch of its own, once the first is over
        return [*first, later]

    assert run_async(main) == [n * 10 for n in range(20)] + [990]
    assert batches == [list(range(20)), [99]]


def test_while_crowded_asks_a_few_ms_apart_share_a_trip_and_alone_each_goes_at_once():
    def batched_sizes(crowded: bool) -> list[int]:
        sizes: list[int] = []

        def run_many(items: list[int]) -> list[int]:
            sizes.append(len(items))
            return items

        async def main() -> None:
            batched = _Batched(run_many, gather_s=0.5, crowded=lambda: crowded)

            async def ask(n: int) -> int:
                await asyncio.sleep(0.01 * n)  # five asks, 10 ms apart
                return await batched(n)

            assert await asyncio.gather(*(ask(n) for n in range(5))) == list(range(5))

        run_async(main)
        return sizes

    assert batched_sizes(crowded=True) == [5]
    alone = batched_sizes(crowded=False)
    assert len(alone) >= 3 and sum(alone) == 5  # 10 ms apart: no trip waited for the next


def test_a_failed_batch_fails_each_of_its_callers_and_the_next_batch_runs():
    calls: list[list[str]] = []

    def run_many(items: list[str]) -> list[str]:
        calls.append(items)
        if "bad" in items:
            raise RuntimeError("database is locked")
        return items

    async def main() -> tuple[list[object], str]:
        batched = _Batched(run_many)
        failed = await asyncio.gather(batched("bad"), batched("other"), return_exceptions=True)
        return failed, await batched("fine")

    failed, fine = run_async(main)
    assert [str(f) for f in failed] == ["database is locked"] * 2 and fine == "fine"
    assert calls == [["bad", "other"], ["fine"]]


@pytest.mark.django_db(transaction=True)
def test_the_ledger_rows_written_in_one_batch_each_get_their_pk():
    from django.db import connections

    from llm.gateway import _write_ledger_rows
    from llm.models import LedgerEntry

    async def main() -> list[int]:
        batched = _Batched(_write_ledger_rows)
        try:
            return await asyncio.gather(
                *(
                    batched(
                        LedgerEntry(
                            stage="t",
                            provider="gemini",
                            model="m",
                            request_hash=f"{n:064d}",
                            outcome="ok",
                            raw_output=str(n),
                        )
                    )
                    for n in range(5)
                )
            )
        finally:
            from asgiref.sync import sync_to_async

            await sync_to_async(connections.close_all)()

    pks = run_async(main)
    assert [LedgerEntry.objects.get(pk=pk).raw_output for pk in pks] == ["0", "1", "2", "3", "4"]
