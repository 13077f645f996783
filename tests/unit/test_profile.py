"""emulator/profile.py through emulator/config.py: `--profile official-emulator` (or
REGIONLAB_PROFILE) gives the official emulator's shape — one region "South Central US" on the
account's own port 8081, HTTPS, account id "localhost", 6,000 RU/s per partition cut at
i × floor(2^128 / N), no RU limits, control port 7081 — while flags and REGIONLAB_* variables
still win; the Linux emulator's variables map where they mean something and are checked; the
ranges of core/epk.py's even layout are exact. Pure: no server starts
(tests/integration/test_official_emulator_profile.py drives the profile with the SDK)."""
import pytest

from regionlab.emulator import profile
from regionlab.emulator.config import ConfigError, from_command_line, from_keywords
from regionlab.emulator.core.epk import EPK_MAX, EPK_MIN, even_ranges

PROFILE = {"profile": "official-emulator"}


def cli(flags=None, **environ):
    return from_command_line(dict(flags or {}), environ)[0]


def test_the_profile_by_flag_and_by_variable_is_the_official_emulators_shape():
    for server in (cli(PROFILE), cli(REGIONLAB_PROFILE="official-emulator"),
                   cli(REGIONLAB_PROFILE=" Official-Emulator ")):
        assert server.account.regions == ("South Central US",)
        assert server.global_port == 8081 and server.region_on_account_port
        assert server.ports() == [8081]
        assert server.https and server.key == profile.topology_defaults.EMULATOR_KEY
        assert server.control_port == 7081
        assert server.account.account_id == "localhost"
        assert server.account.ru_per_partition == 6000 and server.account.range_layout == "even"
        assert server.account.throttle.ru is False


def test_the_default_profile_is_unchanged():
    server = cli()
    assert server.account.regions == ("East US", "East US 2", "West US")
    assert not server.region_on_account_port and not server.https and server.control_port == 8090
    assert server.account.throttle.ru is True and server.account.range_layout == "occupied"
    assert server.account.ru_per_partition == 10_000 and server.account.account_id == "regionlab"


def test_flags_and_regionlab_variables_win_over_the_profile():
    server = cli({**PROFILE, "control_port": "9100"}, REGIONLAB_PORT="9081")
    assert server.control_port == 9100 and server.global_port == 9081


def test_enable_rate_limiting_turns_ru_limits_on_in_the_profile():
    assert cli({**PROFILE, "enable_rate_limiting": True}).account.throttle.ru is True
    assert cli(PROFILE, REGIONLAB_ENABLE_RATE_LIMITING="true").account.throttle.ru is True
    assert from_keywords({**PROFILE, "enable_rate_limiting": True}).account.throttle.ru is True


def test_the_linux_emulators_variables_map_in_the_profile(tmp_path):
    server = cli(PROFILE, AZURE_COSMOS_EMULATOR_IP_ADDRESS_OVERRIDE="10.1.2.3",
                 AZURE_COSMOS_EMULATOR_ENABLE_DATA_PERSISTENCE="true", XDG_DATA_HOME=str(tmp_path),
                 AZURE_COSMOS_EMULATOR_PARTITION_COUNT="3")
    assert server.advertise_host == "10.1.2.3"
    assert server.data_dir == str(tmp_path / "regionlab" / "official-emulator")
    # REGIONLAB_* wins over the Linux emulator's variable, which wins over the profile.
    assert cli(PROFILE, AZURE_COSMOS_EMULATOR_IP_ADDRESS_OVERRIDE="10.1.2.3",
               REGIONLAB_ADVERTISE_HOST="h").advertise_host == "h"
    assert cli(PROFILE, AZURE_COSMOS_EMULATOR_ENABLE_DATA_PERSISTENCE="false").data_dir is None
    # Outside the profile they mean nothing.
    assert cli(AZURE_COSMOS_EMULATOR_IP_ADDRESS_OVERRIDE="10.1.2.3").advertise_host == "127.0.0.1"


@pytest.mark.parametrize("environ, names", [
    ({"REGIONLAB_PROFILE": "offical-emulator"}, ["REGIONLAB_PROFILE='offical-emulator'", "official-emulator"]),
    ({"AZURE_COSMOS_EMULATOR_PARTITION_COUNT": "lots"}, ["AZURE_COSMOS_EMULATOR_PARTITION_COUNT='lots'", "budget"]),
    ({"AZURE_COSMOS_EMULATOR_ENABLE_DATA_PERSISTENCE": "sure"}, ["ENABLE_DATA_PERSISTENCE='sure'", "true/false"]),
])
def test_bad_profile_values_are_one_line_errors(environ, names):
    flags = {} if "REGIONLAB_PROFILE" in environ else PROFILE
    with pytest.raises(ConfigError) as e:
        cli(flags, **environ)
    assert "\n" not in str(e.value) and all(n in str(e.value) for n in names)
    with pytest.raises(ConfigError, match="profile='nope'"):
        from_keywords({"profile": "nope"})


def test_keyword_profile_keeps_free_ports_for_tests():
    server = from_keywords(PROFILE)
    assert server.global_port == 0 and server.control_port == 0 and server.ports() == [0]
    assert server.account.regions == ("South Central US",) and server.https


@pytest.mark.parametrize("count", [1, 2, 3, 5, 7, 64])
def test_even_ranges_cut_at_i_times_floor_of_the_space_over_n(count):
    ranges = even_ranges(count)
    step = 2**128 // count
    assert [lo for lo, _ in ranges] == [EPK_MIN] + [f"{i * step:032X}" for i in range(1, count)]
    assert ranges[-1][1] == EPK_MAX
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))


def test_five_even_ranges_are_the_official_emulators():
    assert [hi for _, hi in even_ranges(5)] == ["3" * 32, "6" * 32, "9" * 32, "C" * 32, "FF"]


def test_the_command_line_tools_find_the_profiles_control_port(monkeypatch):
    from regionlab.emulator.control_client import DEFAULT_CONTROL, control_url
    monkeypatch.delenv("REGIONLAB_CONTROL", raising=False)
    monkeypatch.delenv("REGIONLAB_PROFILE", raising=False)
    assert control_url(None) == DEFAULT_CONTROL
    monkeypatch.setenv("REGIONLAB_PROFILE", "official-emulator")
    assert control_url(None) == "http://127.0.0.1:7081"
    assert control_url("http://127.0.0.1:9/") == "http://127.0.0.1:9"
    monkeypatch.setenv("REGIONLAB_CONTROL", "http://127.0.0.1:8/")
    assert control_url(None) == "http://127.0.0.1:8"
    monkeypatch.setenv("REGIONLAB_PROFILE", "no-such-profile")
    monkeypatch.delenv("REGIONLAB_CONTROL")
    assert control_url(None) == DEFAULT_CONTROL
