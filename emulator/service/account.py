"""`GET /`: the database account document (cosmos-wire §5.1).

Every endpoint, global or regional, answers with the same document. `writableLocations` and
`readableLocations` follow the account's current state (write regions first), with each region's endpoint built from the scheme, host and port it is
actually served on, so the SDK can reach every URL it is given. `userConsistencyPolicy` carries
the bounded-staleness bounds K (`maxStalenessPrefix`, writes) and T (`maxIntervalInSeconds`)
whatever the level, as the service reports them; they bind only a BoundedStaleness account.
"""
import json

from regionlab.client.protocol import headers as H

from ..core.errors import CosmosError
from . import responses

QUERY_ENGINE_CONFIGURATION = json.dumps({
    "maxSqlQueryInputLength": 262144, "maxJoinsPerSqlQuery": 5, "maxLogicalAndPerSqlQuery": 500,
    "maxLogicalOrPerSqlQuery": 500, "maxUdfRefPerSqlQuery": 10, "maxInExpressionItemsCount": 16000,
    "queryMaxInMemorySortDocumentCount": 500, "maxQueryRequestTimeoutFraction": 0.9,
    "sqlAllowNonFiniteNumbers": False, "sqlAllowAggregateFunctions": True, "sqlAllowSubQuery": True,
    "sqlAllowScalarSubQuery": True, "allowNewKeywords": True, "sqlAllowLike": True,
    "sqlAllowGroupByClause": True, "maxSpatialQueryCells": 12, "spatialMaxGeometryPointCount": 256,
    "sqlDisableOptimizationFlags": 0, "sqlAllowTop": True, "enableSpatialIndexing": True})


def document(account, topology) -> dict:
    # Regions that are down stay listed, as in the service: clients find out by failing to reach
    # them (and their health checks). During a graceful failover the target is the writable one.
    writers = account.write_regions or (account.hub_region,)
    writable = [r for r in account.regions if r.name in writers]
    readable = writable + [r for r in account.regions if r.name not in writers]
    loc = lambda r: {"name": r.name, "databaseAccountEndpoint": topology.region_endpoint(r.name)}
    return {
        "id": account.config.account_id, "_rid": f"{account.config.account_id}.documents.azure.com",
        "_self": "", "_dbs": "//dbs/", "media": "//media/", "addresses": "//addresses/",
        "writableLocations": [loc(r) for r in writable],
        "readableLocations": [loc(r) for r in readable],
        "enableMultipleWriteLocations": account.config.multi_write,
        "userReplicationPolicy": {"asyncReplication": False, "minReplicaSetSize": 3, "maxReplicasetSize": 4},
        "userConsistencyPolicy": {"defaultConsistencyLevel": account.consistency,
                                  "maxStalenessPrefix": account.config.staleness_ops,
                                  "maxIntervalInSeconds": account.config.staleness_s},
        "systemReplicationPolicy": {"minReplicaSetSize": 3, "maxReplicasetSize": 4},
        "readPolicy": {"primaryReadCoefficient": 1, "secondaryReadCoefficient": 1},
        "queryEngineConfiguration": QUERY_ENGINE_CONFIGURATION,
    }


def handle(call):
    if call.method not in ("GET", "HEAD"):
        raise CosmosError(405, 0, f"{call.method} is not supported on the account; use GET /.")
    body = document(call.svc.account, call.svc.topology)
    return responses.reply(200, body, call.activity_id, 0.0,
                           {"x-ms-max-media-storage-usage-mb": "10240", "x-ms-media-storage-usage-mb": "0",
                            H.X_MS_VERSION: "2020-07-15"})
