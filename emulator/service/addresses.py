"""`GET /addresses/`: the address feed direct-mode clients resolve replicas with
(docs/direct-protocol.md).

    GET /addresses/?$resolveFor=dbs/db/colls/c/docs&$filter=protocol eq rlmp&$partitionKeyRangeIds=0,1

The reply has the service's address-feed shape (`Addresss`, `isPrimary`, `protocol`,
`physcialUri`, `partitionKeyRangeId`, spelled as the service spells them), one entry per
replica of each requested range in the endpoint's region, with our protocol name (never
`rntbd`, so no official SDK takes the addresses for its own) and the advertised host. Each URI
names this emulator's instance (`apps/<instance>/`, as the service's name their app), which
the node checks in the handshake: a stale address never reaches another emulator's replica.
"""
from urllib.parse import parse_qs

from regionlab.client.protocol import direct as D

from ..core.errors import CosmosError, bad_request
from . import responses
from .paths import rid_based as _rid_based


def handle(call):
    if call.method != "GET":
        raise CosmosError(405, 0, f"{call.method} is not supported on the address feed; use GET /addresses/.")
    query = call.path.partition("?")[2]
    params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    container = _container(call, params.get("$resolveFor"))
    entries = []
    if _protocol_wanted(params.get("$filter")):
        ranges = params.get("$partitionKeyRangeIds")
        wanted = None if not ranges else set(r.strip() for r in ranges.split(","))
        for p in container.partitions:
            if wanted is None or p.range_id in wanted:
                entries += replica_addresses(call.svc, container, p, call.region)
    body = {"_rid": container.rid, "Addresss": entries, "_count": len(entries)}
    return responses.reply(200, body, call.activity_id, 0.0)


def _container(call, resolve_for: str | None):
    segs = (resolve_for or "").strip("/").split("/")
    if len(segs) < 4 or segs[0] != "dbs" or segs[2] != "colls":
        raise bad_request("The address feed needs $resolveFor=dbs/{db}/colls/{coll}/docs "
                          f"(names or rids); got '{(resolve_for or '')[:120]}'.")
    by_rid = _rid_based(segs[1])
    account = call.svc.account
    return account.container(account.database(segs[1], by_rid), segs[3], by_rid)


def _protocol_wanted(filter_text: str | None) -> bool:
    """`$filter=protocol eq <name>` selects by protocol; only ours has addresses here."""
    if not filter_text:
        return True
    words = filter_text.replace("'", " ").split()
    if len(words) == 3 and words[0].lower() == "protocol" and words[1].lower() == "eq":
        return words[2].lower() == D.PROTOCOL
    raise bad_request(f"The address feed's $filter must be 'protocol eq {D.PROTOCOL}'; got '{filter_text[:80]}'.")


def replica_addresses(svc, container, p, region: str) -> list:
    account = svc.account
    rs = p.replica_sets.get(region)
    if rs is None:
        return []
    placement = account.placement
    ports = svc.topology.direct_ports
    host = svc.topology.host
    instance = svc.topology.instance
    region_up = account.region_state(region) == "up"
    out = []
    for i, node in enumerate(placement.replica_nodes(region, container.rid, p.range_id)):
        r = rs.replicas[i]
        key = D.replica_key(container.rid, p.range_id, i)
        primary = r is rs.primary
        uri = D.replica_uri(host, ports.get((region, node), 0), key, primary, instance)
        up = region_up and r.state == "up" and placement.listening(region, node)
        out.append({"id": key, "_rid": container.rid, "isPrimary": primary, "protocol": D.PROTOCOL,
                    "logicalUri": uri, "physcialUri": uri, "partitionIndex": p.range_id,
                    "partitionKeyRangeId": p.range_id, "region": region, "replica": key, "node": node,
                    "state": "up" if up else "down"})
    return out
