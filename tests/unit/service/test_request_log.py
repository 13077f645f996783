"""Proves request_log.RequestLog: each reply counted once in the window of its answer under its
region, operation, status, substatus and latency class (an upper bound within a class's width);
GET /requests's paging (whole windows, `more`, next_since_ms); and the bound: past ENTRIES_MAX
keys the oldest windows go, so the entries never exceed it however long a run lasts."""
from regionlab.emulator.service import request_log
from regionlab.emulator.service.request_log import LATENCY_CLASSES_MS, WINDOW_MS, RequestLog, latency_class_ms


def test_a_reply_is_counted_in_the_window_it_was_answered_in_with_its_latency_class():
    log = RequestLog()
    log.add(1_000_050, 1_000_080, "East US", "read", 200, 0)
    log.add(1_000_090, 1_000_160, "East US", "read", 200, 0)        # answered in the next window
    log.add(1_000_100, 1_000_101, "East US", "read", 200, 0)
    log.add(1_000_100, 1_000_101, "East US", "write", 503, 0)
    log.add(1_000_100, 1_000_150, "East US", "write", 201, "drop_after_apply")
    got = log.since(0)
    assert [w["start_ms"] for w in got["windows"]] == [1_000_000, 1_000_100]
    assert got["windows"][0]["requests"] == [{"region": "East US", "op": "read", "status": 200, "substatus": 0,
                                              "latency_ms_max": 30, "count": 1}]
    second = {(r["op"], r["status"], r["substatus"], r["latency_ms_max"]): r["count"] for r in got["windows"][1]["requests"]}
    assert second == {("read", 200, 0, 80): 1, ("read", 200, 0, 1): 1, ("write", 503, 0, 1): 1,
                      ("write", 201, "drop_after_apply", 50): 1}
    assert got["next_since_ms"] == 1_000_200 and got["more"] is False and got["entries"] == 5


def test_latency_classes_are_upper_bounds_about_a_quarter_apart():
    assert [latency_class_ms(ms) for ms in (0, 1, 7, 8, 9, 101, 100_001, 10**9)] == [0, 1, 8, 8, 10, 120, 120000, 120000]
    for low, high in zip(LATENCY_CLASSES_MS[4:], LATENCY_CLASSES_MS[5:]):
        assert high <= low * 1.34


def test_since_pages_by_whole_windows():
    log = RequestLog()
    for w in range(5):
        for region in ("East US", "West US"):
            log.add(w * WINDOW_MS, w * WINDOW_MS, region, "read", 200, 0)
    first = log.since(100, entries_max=3)
    assert [w["start_ms"] for w in first["windows"]] == [100] and first["more"] is True
    rest = log.since(first["next_since_ms"], entries_max=100)
    assert [w["start_ms"] for w in rest["windows"]] == [200, 300, 400] and rest["more"] is False


def test_the_log_is_bounded_in_entries_dropping_the_oldest_windows(monkeypatch):
    monkeypatch.setattr(request_log, "ENTRIES_MAX", 10)
    log = RequestLog()
    for w in range(20):
        for status in (200, 404, 503):
            log.add(w * WINDOW_MS, w * WINDOW_MS, "East US", "read", status, 0)
        assert log.entries <= 10
    got = log.since(0)
    assert [w["start_ms"] for w in got["windows"]] == [1700, 1800, 1900]
    assert got["dropped_before_ms"] == 1700 and got["entries"] == 9


def test_the_log_keeps_at_most_windows_max_windows(monkeypatch):
    monkeypatch.setattr(request_log, "WINDOWS_MAX", 4)
    log = RequestLog()
    for w in range(10):
        log.add(w * WINDOW_MS, w * WINDOW_MS, "East US", "read", 200, 0)
    assert [w["start_ms"] for w in log.since(0)["windows"]] == [600, 700, 800, 900] and log.entries == 4


def test_add_classes_every_latency_as_latency_class_ms_does():
    # add looks the classes of latencies under a second up in a table made from latency_class_ms.
    log = RequestLog()
    for ms in range(-1, 1500):
        log.add(10_000, 10_000 + ms, "East US", "read", 200, ms)
    got = {r["substatus"]: r["latency_ms_max"] for w in log.since(0)["windows"] for r in w["requests"]}
    assert got == {ms: latency_class_ms(ms) for ms in range(-1, 1500)}
