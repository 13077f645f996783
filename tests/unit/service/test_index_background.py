"""Proves that a new index the planner started on a big store is finished between requests, one
bounded step per event-loop turn: never whole in one turn (which would hold every region's loop),
and whole after enough turns without any further query. Driven on a real asyncio loop, counting
turns (sleep(0)), never waiting on time."""
import asyncio
import json

import pytest
import uvloop

from regionlab.emulator.core.index import INDEX_BUILD_STEP_VERSIONS, materialise
from regionlab.emulator.core.store import Version, VersionStore
from regionlab.emulator.service.queries import build_in_background

DOCS = 6 * INDEX_BUILD_STEP_VERSIONS


def _store():
    store = VersionStore()
    for i in range(DOCS):
        doc = {"id": str(i), "pk": f"p{i % 10}", "n": i}
        store.add(Version(i + 1, (json.dumps([doc["pk"]]), doc["id"]), doc, b"{}", "e", 0, "r"), 0)
    return store


@pytest.mark.parametrize("runner", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])
def test_the_loop_finishes_a_building_index_a_step_per_turn(runner):
    store = _store()
    index = materialise(store, ("n",))             # what the first query on c.n does
    assert not index.ready and index.size == INDEX_BUILD_STEP_VERSIONS

    async def main():
        soon = asyncio.get_running_loop().call_soon
        build_in_background(store, soon)
        build_in_background(store, soon)           # once per store, however many queries ask
        sizes = []
        for _ in range(DOCS // INDEX_BUILD_STEP_VERSIONS + 2):
            await asyncio.sleep(0)
            sizes.append(index.size)
        return sizes
    sizes = runner(main())
    assert index.ready and index.size == DOCS
    steps = [b - a for a, b in zip([INDEX_BUILD_STEP_VERSIONS] + sizes, sizes)]
    assert max(steps) <= INDEX_BUILD_STEP_VERSIONS       # never more than one step in a turn


def test_without_a_running_loop_the_index_builds_on_demand_only():
    store = _store()
    index = materialise(store, ("n",))
    build_in_background(store, None)
    assert index.size == INDEX_BUILD_STEP_VERSIONS and not index.ready
