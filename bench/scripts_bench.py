"""What server-side JavaScript costs, as ratios to the plain operation measured in the same run
(the official sync SDK against an in-process emulator, 3 regions, Session; docs/scripts.md).

    python bench/scripts_bench.py [--n 200]

Rows (median wall time of n requests each, then the ratio to its reference):
  create_item                       the reference for writes
  sproc creating 1 item             a new V8 isolate, the prelude, one round, one commit
  sproc creating 10 items           ten operations in one round, one commit
  create_item with a pre-trigger    an isolate per trigger, the write in its transaction
  query of 100 items                `SELECT VALUE c.x FROM c` in one partition: the reference for UDFs
  the same with a UDF               `SELECT VALUE udf.f(c.x) FROM c`: 100 synchronous V8 calls
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from azure.cosmos import CosmosClient, PartitionKey  # noqa: E402

from gateway_bench import machine  # noqa: E402
from regionlab.emulator.testing import running_emulator  # noqa: E402

MAKE = """function make(prefix, n) {
  for (var i = 0; i < n; i++) { __.createDocument({id: prefix + '-' + i, pk: 'w'}); }
  getContext().getResponse().setBody(n);
}"""


def _median_ms(n: int, fn) -> float:
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    n = ap.parse_args().n
    with running_emulator(port=0, direct_ports=0) as emu, \
            CosmosClient(emu.endpoint, emu.key, connection_timeout=30) as client:
        c = client.create_database("bench").create_container("c", PartitionKey(path="/pk"))
        c.scripts.create_stored_procedure({"id": "make", "body": MAKE})
        c.scripts.create_trigger({"id": "stamp", "triggerType": "Pre", "triggerOperation": "Create",
                                  "body": "function () { var r = getContext().getRequest(), d = r.getBody(); "
                                          "d.stamped = true; r.setBody(d); }"})
        c.scripts.create_user_defined_function({"id": "f", "body": "function (x) { return x * 2; }"})
        for i in range(100):
            c.create_item({"id": f"q{i}", "pk": "q", "x": i})
        rows = []
        create = _median_ms(n, lambda i: c.create_item({"id": f"c{i}", "pk": "w"}))
        rows.append(("create_item", create, create))
        rows.append(("sproc creating 1 item", _median_ms(
            n, lambda i: c.scripts.execute_stored_procedure("make", partition_key="w", params=[f"s{i}", 1])), create))
        rows.append(("sproc creating 10 items", _median_ms(
            n, lambda i: c.scripts.execute_stored_procedure("make", partition_key="w", params=[f"t{i}", 10])), create))
        rows.append(("create_item with a pre-trigger", _median_ms(
            n, lambda i: c.create_item({"id": f"p{i}", "pk": "w"}, pre_trigger_include="stamp")), create))
        plain = _median_ms(n // 4, lambda i: list(c.query_items("SELECT VALUE c.x FROM c", partition_key="q")))
        rows.append(("query of 100 items", plain, plain))
        rows.append(("the same with a UDF", _median_ms(
            n // 4, lambda i: list(c.query_items("SELECT VALUE udf.f(c.x) FROM c", partition_key="q"))), plain))
    print(machine())
    for name, ms, ref in rows:
        print(f"{name:34s} {ms:8.2f} ms   x{ms / ref:5.1f}")


if __name__ == "__main__":
    main()
