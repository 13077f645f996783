"""The official Java SDK (com.azure:azure-cosmos, gateway mode over --https, the certificate in a
trust store) runs the seed's configurations against regionlab with the faults that trigger them
(tests/java/.../Scenarios.java, one JVM, one JSON line per scenario):

* preferred regions: reads and (multi-write) writes go to the first preferred region;
* the availability strategy, threshold 500 ms + 100 ms steps: a read held 3 s in West US is
  answered by East US 2 after the threshold;
* excluded regions from a supplier the application changes while the client runs;
* the partition-level circuit breaker (COSMOS.PARTITION_LEVEL_CIRCUIT_BREAKER_CONFIG): after 10
  reads that failed over from West US (503), the partition's reads go to East US 2 directly;
* region-scoped session capture (COSMOS.SESSION_CAPTURING_TYPE=REGION_SCOPED) on a multi-write
  account: a read with the write's session token is answered in the other region too.

Maven fetches the SDK from Maven Central into ~/.m2 (tests/java/pom.xml pins it through the
azure-sdk-bom); javac builds the scenarios into tests/java/target. In CI, Java 17 and Maven are
installed when missing (tests/tiers.py) and the test fails without them; elsewhere it skips.
"""
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from sdk_harness import no_lag
from tiers import require
from regionlab.emulator.testing import running_emulator

pytestmark = pytest.mark.slow              # a Maven resolve, a javac and a JVM
JAVA_DIR = Path(__file__).resolve().parents[1] / "java"
TARGET = JAVA_DIR / "target"
REGIONS = ["East US", "East US 2", "West US"]
SCENARIOS = ("routing", "hedging", "excluded", "breaker", "session")
BUILD_TIMEOUT_S = 600
RUN_TIMEOUT_S = 300
JAVA_PROPERTIES = {
    "COSMOS.PARTITION_LEVEL_CIRCUIT_BREAKER_CONFIG": json.dumps({
        "isPartitionLevelCircuitBreakerEnabled": True, "circuitBreakerType": "CONSECUTIVE_EXCEPTION_COUNT_BASED",
        "circuitBreakerFailureTolerance": "LOW"}),
    "COSMOS.SESSION_CAPTURING_TYPE": "REGION_SCOPED",
}


def build(mvn: str, javac: str) -> Path:
    """tests/java/target/{lib,classes}, rebuilt when the pom or the source changed."""
    sources = sorted(JAVA_DIR.joinpath("src").rglob("*.java"))
    stamp = hashlib.sha256(b"".join(p.read_bytes() for p in [JAVA_DIR / "pom.xml", *sources])).hexdigest()
    if (TARGET / "stamp").exists() and (TARGET / "stamp").read_text() == stamp:
        return TARGET
    shutil.rmtree(TARGET, ignore_errors=True)
    for cmd in ([mvn, "-q", "-B", "dependency:copy-dependencies", f"-DoutputDirectory={TARGET / 'lib'}"],
                [javac, "-d", str(TARGET / "classes"), "-cp", str(TARGET / "lib") + "/*", *map(str, sources)]):
        done = subprocess.run(cmd, cwd=JAVA_DIR, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        assert done.returncode == 0, f"{' '.join(cmd[:3])} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    (TARGET / "stamp").write_text(stamp)
    return TARGET


@pytest.fixture(scope="module")
def seen(tmp_path_factory) -> dict:
    java, javac, mvn, keytool = require(("java", "javac", "mvn", "keytool"), ("openjdk-17-jdk-headless", "maven"),
                                        "the Java SDK tests need Java 17 and Maven")
    target = build(mvn, javac)
    certs = tmp_path_factory.mktemp("certs")
    # No replication lag: the scenarios read in other regions right after their writes.
    with running_emulator(https=True, cert_dir=str(certs), regions=REGIONS, multi_write=True,
                          lag_ms=no_lag(REGIONS)) as emu:
        store = certs / "trust.jks"
        subprocess.run([keytool, "-importcert", "-noprompt", "-alias", "regionlab", "-file",
                        emu.certificate, "-keystore", str(store), "-storepass", "changeit"],
                       check=True, capture_output=True)
        # The SDK derives regional names from the account's host: a name, not 127.0.0.1.
        env = dict(os.environ, URL=emu.endpoint.replace("127.0.0.1", "localhost"), KEY=emu.key,
                   CONTROL=emu.control_endpoint)
        props = [f"-D{k}={v}" for k, v in JAVA_PROPERTIES.items()]
        done = subprocess.run([java, f"-Djavax.net.ssl.trustStore={store}", "-Djavax.net.ssl.trustStorePassword=changeit",
                               *props, "-cp", f"{target / 'classes'}:{target / 'lib'}/*",
                               "dev.regionlab.javasdk.Scenarios", *SCENARIOS],
                              env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {line["scenario"]: line for line in lines}


def scenario(seen: dict, name: str) -> dict:
    got = seen[name]
    assert "error" not in got, got["error"]
    return got


def test_preferred_regions_route_reads_and_multi_region_writes(seen):
    got = scenario(seen, "routing")
    assert got["write"] == ["west us"] and got["read"] == ["west us"]
    assert got["query_rows"] == 1 and got["after_delete"] == 404


def test_the_availability_strategy_hedges_to_the_next_region_after_its_threshold(seen):
    got = scenario(seen, "hedging")
    assert "east us 2" in got["read"], got
    # West US holds the read 3 s: answered by the hedge after the 500 ms threshold, well before
    # (the upper bound is generous for a loaded 2-core machine).
    assert 500 <= got["ms"] < 2500, got


def test_excluded_regions_from_a_supplier_take_effect_while_the_client_runs(seen):
    got = scenario(seen, "excluded")
    assert got["before"] == ["west us"] and got["after"] == ["east us 2"]


def test_the_partition_level_breaker_moves_reads_after_ten_failures(seen):
    contacted = scenario(seen, "breaker")["contacted"]
    assert contacted[:10] == [["west us", "east us 2"]] * 10      # each failed in West US, then served
    assert contacted[10:] == [["east us 2"]] * 5                   # the breaker opened: East US 2 at once


def test_region_scoped_session_capture_reads_a_write_of_another_region(seen):
    got = scenario(seen, "session")
    assert got["write"] == ["west us"] and got["read_own"] == ["west us"] and got["read_other_status"] == 200
