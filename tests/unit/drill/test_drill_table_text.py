"""Proves the terminal summary reads as people read it: availability as percentages (never 100 %
while anything failed), no lost-writes line that judges 0 of 0 acknowledged writes, long id lists
cut to the first few and a count, and the workload as a sentence. Pure functions on hand-made
report pieces."""
from regionlab.emulator.drill.table import LIST_MAX, lost_line, pct, verdict_text, workload_text


def test_availability_is_a_percentage_that_never_rounds_a_failure_away():
    assert pct(1.0) == "100.00%" and pct(0.99954) == "99.95%" and pct(0.999999) == "99.99%"
    assert verdict_text({"name": "availability outside fault windows", "value": 0.995, "op": ">=",
                         "limit": 0.99}) == "99.50% >= 99.00%"
    assert verdict_text({"name": "RTO of [x] (ms)", "value": 1100.0, "op": "<=", "limit": 3000}) == "1100.0 <= 3000"


def test_no_acknowledged_write_is_not_judged_and_long_lists_are_cut():
    none = {"listed": 0, "acknowledged_writes": 0, "acknowledged_unreadable": 0, "match": True,
            "unreadable_not_listed": []}
    assert lost_line(none) == "lost writes: 0 listed by GET /lost-writes; no acknowledged write to read back (not judged)"
    ids = [f"w-{i}" for i in range(LIST_MAX + 7)]
    many = dict(none, acknowledged_writes=40, acknowledged_unreadable=len(ids), match=False, unreadable_not_listed=ids)
    line = lost_line(many)
    assert line.endswith(f"NOT ALL LISTED: w-0, w-1, w-2, w-3, w-{LIST_MAX - 1} and 7 more (report.json has them all)")


def test_the_workload_is_a_sentence():
    w = {"client": "azure-cosmos", "mix": {"read": 0.7, "write": 0.2, "query": 0.1, "x": 0}, "concurrency": 16,
         "rate_per_s": 500, "keys": 1000, "client_options": {"preferred_locations": ["East US", "West US"]}}
    assert workload_text(w) == ("16 workers of the official azure-cosmos SDK, at most 500 operations/s: 70% reads, "
                                "20% writes, 10% queries over 1000 keys; client options: preferred locations: "
                                "East US, West US.")


def test_a_long_setup_name_is_shown_whole():
    from regionlab.emulator.drill.table import comparison
    row = {"setup": "hedging at 150 ms and the partition-level breaker", "ops": 10, "availability": 1.0,
           "availability_in_fault_windows": 0.5, "p99_ms": 3.0, "p99_ms_in_fault_windows": 500.0,
           "request_charge": 10.0, "hedged_extra_charge": 1.0, "extra_ru_share": 0.1, "breaker_opened": 2}
    lines = comparison({"comparison": [row]})
    assert lines[-1].startswith("hedging at 150 ms and the partition-level breaker  10  ")
    assert "50.00%" in lines[-1]
