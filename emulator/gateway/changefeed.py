"""Change feed: not served yet (it comes with the queries and change feed work).

Until then the gateway answers a clear 501 rather than a wrong feed.
"""
from ..core.errors import CosmosError


async def change_feed(call, container):
    raise CosmosError(501, 0, "The change feed is not implemented in this regionlab version yet.")
