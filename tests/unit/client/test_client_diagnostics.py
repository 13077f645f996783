"""Proves an operation's Diagnostics as data (client/diagnostics.py), built by hand: regions
contacted in first-contact order, retries and hedges counted, the total charge the sum of every
attempt's, times in milliseconds rounded to microseconds in to_dict()/JSON, and the slow-operation
log line only above the threshold."""
import json
import logging

from regionlab.client.diagnostics import Attempt, Diagnostics


def diagnostics():
    d = Diagnostics("read", "/dbs/d/colls/c/docs/1", started_s=10.0)
    d.attempts += [Attempt("East US", "http://east/", 0.0, status=503, latency_ms=1.23456789, request_charge=1.0),
                   Attempt("West US", "http://west/", 1.3, "503/0: next region", status=200, latency_ms=2.0,
                           request_charge=1.5),
                   Attempt("East US", "http://east/", 500.0, "hedge after 500 ms", hedge=True, error="cancelled")]
    d.event(10.0015, "account", "refreshed")
    d.latency_ms, d.status = 3.5, 200
    return d


def test_to_dict_has_the_totals_the_order_and_every_attempt():
    out = json.loads(diagnostics().to_json())
    assert (out["regions_contacted"], out["retries"], out["hedges"], out["request_charge"]) == \
        (["East US", "West US"], 1, 1, 2.5)
    assert [a["latency_ms"] for a in out["attempts"]] == [1.235, 2.0, 0.0]
    assert out["attempts"][1]["reason"] == "503/0: next region" and out["attempts"][2]["error"] == "cancelled"
    assert out["events"] == [{"at_ms": 1.5, "kind": "account", "detail": "refreshed"}]


def test_the_log_line_is_written_only_above_the_threshold(caplog):
    d = diagnostics()
    with caplog.at_level(logging.WARNING, logger="regionlab.client.diagnostics"):
        d.maybe_log(3.5)
        assert caplog.records == []
        d.maybe_log(3.0)
    assert len(caplog.records) == 1 and json.loads(caplog.records[0].getMessage().split(" ", 2)[2])["status"] == 200
