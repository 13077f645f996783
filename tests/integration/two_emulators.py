"""Two emulators on one machine with the default direct port range, for test_direct_port_range.py.
Run inside a private network namespace (`unshare -rn`, loopback brought up first), so that the
fixed default ports (8081-8084, 8090, 10000-...) are free whatever else runs on the machine:

    python two_emulators.py

Starts emulator A with every default, then B with `--port 9100 --control-port 9190` (its direct
ports left to the default range), and in each creates an item and reads it back through the
bundled client in direct mode; then tries C with `--direct-ports 10000-20000` given explicitly,
whose first port A holds. Prints one JSON line: each one's ready line (or exit status and stderr),
and for A and B the direct address each operation was served by.
"""
import json
import subprocess
import sys
import tempfile

from regionlab.client import CosmosClient, PartitionKey

EXIT_TIMEOUT_S = 10.0
B_FLAGS = ("--port", "9100", "--control-port", "9190")
C_FLAGS = ("--port", "9200", "--control-port", "9290", "--direct-ports", "10000-20000")


def _start(*flags: str) -> tuple:
    stderr = tempfile.TemporaryFile()
    return subprocess.Popen([sys.executable, "-m", "regionlab.emulator", *flags], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=stderr, text=True), stderr


def _ready(proc: subprocess.Popen, stderr) -> dict:
    line = proc.stdout.readline()
    if not line:
        proc.wait(EXIT_TIMEOUT_S)
        stderr.seek(0)
        return {"exit": proc.returncode, "stderr": stderr.read().decode(errors="replace")}
    return json.loads(line)


def _direct_addresses(info: dict) -> list:
    """Create db/items/a and read it back in direct mode: the address that served each."""
    with CosmosClient(info["account_endpoint"], credential=info["key"], connection_mode="direct") as client:
        c = client.create_database_if_not_exists("db").create_container_if_not_exists(
            "items", partition_key=PartitionKey(path="/pk"))
        created = c.upsert_item({"id": "a", "pk": "p"})
        read = c.read_item("a", partition_key="p")
        assert read["id"] == "a"
        return [_served_by(created.diagnostics), _served_by(read.diagnostics)]


def _served_by(diagnostics) -> str | None:
    d = diagnostics.to_dict()
    if d["attempts"][-1].get("direct", {}).get("fallback") is not None:
        return None                       # went through the gateway
    return next((r["address"] for r in d["replicas_contacted"] if r.get("status") in (200, 201)), None)


def main() -> None:
    procs = []
    out = {}
    try:
        for name, flags in (("a", ()), ("b", B_FLAGS), ("c", C_FLAGS)):
            proc, stderr = _start(*flags)
            procs.append(proc)
            out[name] = _ready(proc, stderr)
            if name != "c" and out[name].get("ready"):
                out[name + "_served_by"] = _direct_addresses(out[name])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(EXIT_TIMEOUT_S)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
