"""emulator/config.py checks every setting once, whichever entry it comes through — keyword options
(running_emulator, the marker), flags and REGIONLAB_* variables — and refuses a bad one with a
ConfigError of one line naming its source, its value and what is allowed; good values build the
ServerConfig they describe. Pure: no server starts (tests/integration/test_cli.py runs the CLI).
"""
import pytest

from regionlab.emulator import config, defaults
from regionlab.emulator.config import ConfigError, from_command_line, from_keywords

NO_FLAGS: dict = {}

BAD_KEYWORDS = [
    ({"consistency": "Strongg"}, "consistency='Strongg'", "Strong, BoundedStaleness, Session"),
    ({"partitions": 0}, "partitions=0", "from 1 to 256"),
    ({"partitions": -1}, "partitions=-1", "from 1 to 256"),
    ({"intra_region_delay_ms": -5}, "intra_region_delay_ms=-5", "from 0 to"),
    ({"regions": []}, "regions=[]", "names no region"),
    ({"regions": ["East US", "east us"]}, "regions=", "twice"),
    ({"key": "notbase64!!"}, "key='notbase64!!'", "base64"),
    ({"multi_write": "maybe"}, "multi_write='maybe'", "true/false"),
    ({"port": 99999}, "port=99999", "from 0 to 65535"),
    ({"max_staleness_prefix": 0}, "max_staleness_prefix=0", "from 1 to 2147483647"),
    ({"max_interval_s": 86401}, "max_interval_s=86401", "from 1 to 86400"),
    ({"credits_per_s": 0}, "credits_per_s=0", "'default'"),
    ({"lag_ms": {("East US", "Mars"): 5}}, "Mars", "the regions are"),
    ({"partitons": 4}, "unknown regionlab option 'partitons'", "partitions"),
    ({"instance_id": "a/b"}, "instance_id='a/b'", "A-Z a-z 0-9 . _ -"),
    ({"instance_id": ""}, "instance_id=''", "A-Z a-z 0-9 . _ -"),
    ({"consistency": "Strong", "multi_write": True}, "Strong consistency cannot be combined", "multi-write"),
]


@pytest.mark.parametrize("options,names,allowed", BAD_KEYWORDS, ids=[str(o) for o, _, _ in BAD_KEYWORDS])
def test_a_bad_keyword_option_is_one_line_naming_it_and_what_is_allowed(options, names, allowed):
    with pytest.raises(ConfigError) as e:
        from_keywords(options)
    message = str(e.value)
    assert "\n" not in message
    assert names in message and allowed in message, message


def test_keyword_options_build_the_account_they_name():
    cfg = from_keywords({"regions": ["North Europe", "West Europe"], "consistency": "boundedSTALENESS",
                         "partitions": 3, "multi_write": False, "max_staleness_prefix": 7, "max_interval_s": 9,
                         "auth": False, "credits_per_s": True, "lag_ms": {("North Europe", "West Europe"): 0}})
    a = cfg.account
    assert a.regions == ("North Europe", "West Europe")
    assert a.consistency == "BoundedStaleness", "levels are taken in any case and stored canonical"
    assert (a.partition_count, a.staleness_ops, a.staleness_s) == (3, 7, 9)
    assert cfg.key is None and a.throttle.credits_per_s == 1000
    assert (cfg.host, cfg.global_port, cfg.control_port) == ("127.0.0.1", 0, 0), "loopback, free ports"


def test_the_defaults_are_the_documented_ones():
    a = from_keywords({}).account
    assert (a.staleness_ops, a.staleness_s) == (100_000, 300)
    assert a.regions == defaults.REGIONS and a.consistency == defaults.CONSISTENCY and a.partition_count is None
    cfg, level = from_command_line(NO_FLAGS, {})
    assert (cfg.global_port, cfg.control_port, cfg.host, level) == (defaults.GLOBAL_PORT, defaults.CONTROL_PORT,
                                                                    defaults.HOST, "WARNING")
    assert cfg.key == defaults.EMULATOR_KEY


@pytest.mark.parametrize("word,on", [("true", True), ("1", True), ("yes", True), ("ON", True),
                                     ("false", False), ("0", False), ("no", False), ("Off", False)])
def test_boolean_variables_take_the_usual_words(word, on):
    cfg, _ = from_command_line(NO_FLAGS, {"REGIONLAB_MULTI_WRITE": word, "REGIONLAB_NO_AUTH": word})
    assert cfg.account.multi_write is on
    assert (cfg.key is None) is on, "REGIONLAB_NO_AUTH=true turns auth off"


@pytest.mark.parametrize("word", ["maybe", "2", "enabled", "tru"])
def test_a_boolean_variable_refuses_anything_else(word):
    with pytest.raises(ConfigError, match=f"REGIONLAB_MULTI_WRITE='{word}': must be one of true/false"):
        from_command_line(NO_FLAGS, {"REGIONLAB_MULTI_WRITE": word})


def test_a_flag_wins_over_its_variable_and_an_empty_variable_is_unset():
    env = {"REGIONLAB_PORT": "9000", "REGIONLAB_PARTITIONS": "", "REGIONLAB_MAX_STALENESS_PREFIX": "12"}
    cfg, _ = from_command_line({"port": "0"}, env)
    assert cfg.global_port == 0 and cfg.account.partition_count is None and cfg.account.staleness_ops == 12


def test_a_bad_variable_is_named_as_the_variable():
    with pytest.raises(ConfigError, match=r"^REGIONLAB_PORT='http': must be an integer from 0 to 65535"):
        from_command_line(NO_FLAGS, {"REGIONLAB_PORT": "http"})
    with pytest.raises(ConfigError, match=r"^--max-interval-s '0': must be an integer from 1 to 86400"):
        from_command_line({"max_interval_s": "0"}, {})


def test_ports_must_fit_and_not_collide():
    with pytest.raises(ConfigError, match="past 65535"):
        from_keywords({"port": 65534})
    with pytest.raises(ConfigError, match="control port 8083 collides"):
        from_command_line({"control_port": "8083"}, {})


def test_every_flag_has_help_and_a_variable():
    flagged = [o for o in config.OPTIONS if o.flag]
    assert all(o.help and o.variable == "REGIONLAB_" + o.flag[2:].upper().replace("-", "_") for o in flagged)


def test_the_read_strategy_comes_from_its_flag_variable_or_option():
    assert from_keywords({}).account.read_strategy == "active_requests"
    assert from_keywords({"read_strategy": "connections"}).account.read_strategy == "connections"
    cfg, _ = from_command_line(NO_FLAGS, {"REGIONLAB_READ_STRATEGY": "Connections"})
    assert cfg.account.read_strategy == "connections"
    with pytest.raises(ConfigError, match="--read-strategy 'sticky': must be one of active_requests, connections"):
        from_command_line({"read_strategy": "sticky"}, {})
