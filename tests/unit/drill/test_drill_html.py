"""Proves report.html is self-contained: with matplotlib the four plots are inline PNG data URIs,
without it (REGIONLAB_REPORT_NO_PLOTS=1, which the page honors as matplotlib being absent) the
tables are all there with the install hint; never a link to the network; text is escaped; a
drill with setups gets its comparison plots and tables."""
import re

import pytest

from regionlab.emulator.drill import html
from regionlab.emulator.drill.report import LostWrites, build
from regionlab.emulator.drill.scenario import parse
from regionlab.emulator.drill.workload import Op


def report():
    drill = parse({"name": "<b>x</b>", "duration_ms": 4000, "account": {"regions": ["East US", "East US 2"]},
                   "schedule": [{"at_ms": 1000, "fault": {"type": "region_outage", "region": "East US 2"}, "as": "o"},
                                {"at_ms": 3000, "heal": "o"}],
                   "assertions": {"availability_min": 0.5}})
    ops = [Op(t, "read", 200, 0, 3.0, "East US", ["503/0 unavailable"] if t == 1500 else [], 1.0) for t in range(0, 4000, 50)]
    lost = LostWrites(listed=[{"id": "w-1", "partition": "0", "lsn": 3, "operation": "create", "region": "East US",
                               "reason": "forced failover #1"}], acked=1, acked_unreadable=["w-1"], listed_acked=["w-1"])
    return build(drill, ops, lost, [], 0.0)


def test_plots_are_inline_pngs():
    pytest.importorskip("matplotlib")
    page = html.render(report())
    assert len(re.findall(r"src='data:image/png;base64,[A-Za-z0-9+/=]+'", page)) == 4
    assert not re.search(r"(src|href)=['\"]?https?:", page)


def test_without_matplotlib_the_tables_remain_and_say_how_to_get_plots(monkeypatch):
    monkeypatch.setenv(html.NO_PLOTS_VARIABLE, "1")
    assert html.load_pyplot() is None
    page = html.render(report())
    assert "data:image" not in page and html.INSTALL_HINT in page
    assert "region_outage East US 2" in page and "forced failover #1" in page and "PASS" in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page
    assert not re.search(r"(src|href)=['\"]?https?:", page)


def compared():
    from regionlab.emulator.drill.comparison import combine
    drill = parse({"name": "cmp", "duration_ms": 2000, "account": {"regions": ["East US", "East US 2"]},
                   "setups": [{"name": "none"}, {"name": "hedging", "client_options": {"availability_strategy": True}}],
                   "schedule": [{"at_ms": 500, "client": {"excluded_locations": []}, "label": "open up"},
                                {"at_ms": 1000, "fault": {"type": "latency", "region": "East US", "delay_ms": 9}}]})
    runs = []
    for setup, hedged in zip(drill.setups, (0.0, 2.0)):
        ops = [Op(t, "read", 200, 0, 3.0, "East US", ["503/0"], 1.0 + hedged, hedged) for t in range(0, 2000, 50)]
        runs.append((setup, build(drill.for_setup(setup), ops, LostWrites([], 0, []), [], 0.0), ops))
    return combine(drill, runs)


def test_a_comparison_page_has_its_own_plots_and_tables():
    pytest.importorskip("matplotlib")
    page = html.render(compared())
    assert len(re.findall(r"src='data:image/png;base64,[A-Za-z0-9+/=]+'", page)) == 4
    assert "Setups compared" in page and "hedged extra RU" in page and "Client option changes" in page
    assert "[hedging] steady state" in page and not re.search(r"(src|href)=['\"]?https?:", page)
