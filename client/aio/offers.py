"""Throughput (offers) of a database or container: read by querying /offers for the resource's
`_self`, replaced with a PUT of the offer with the new number."""
from client.exceptions import CosmosResourceNotFoundError
from client.protocol import status as S

from .links import link_path
from .request import Request, request_options
from .responses import body_json, dumps


class ThroughputProperties:
    def __init__(self, offer: dict, diagnostics=None):
        content = offer.get("content") or {}
        self.properties = offer
        self.offer_throughput = content.get("offerThroughput")
        self.auto_scale_max_throughput = (content.get("offerAutopilotSettings") or {}).get("maxThroughput")
        self.diagnostics = diagnostics

    @property
    def request_charge(self) -> float:
        return self.diagnostics.request_charge if self.diagnostics else 0.0


class Throughput:
    """Mixed into the database and container proxies (each has `client` and `_offer_resource`)."""

    async def _offer(self, **kwargs):
        resource = await self._offer_resource()
        body = dumps({"query": "SELECT * FROM root r WHERE r.resource=@link",
                      "parameters": [{"name": "@link", "value": resource}]})
        req = Request("POST", "/offers", "read_offer",
                      {"content-type": "application/query+json", "x-ms-documentdb-isquery": "True"}, body,
                      **request_options(kwargs))
        reply, diag = await self.client._pipeline.execute(req)
        offers = (body_json(reply) or {}).get("Offers", [])
        if not offers:
            raise CosmosResourceNotFoundError(S.NOT_FOUND, f"{resource} has no throughput of its own",
                                              sub_status=S.SUB_THROUGHPUT_OFFER_NOT_FOUND,
                                              diagnostics=diag, request_charge=diag.request_charge)
        return offers[0], diag

    async def get_throughput(self, **kwargs) -> ThroughputProperties:
        offer, diag = await self._offer(**kwargs)
        return ThroughputProperties(offer, diag)

    read_offer = get_throughput          # the SDK's older name

    async def replace_throughput(self, throughput, **kwargs) -> ThroughputProperties:
        offer, _ = await self._offer(**kwargs)
        offer = dict(offer)
        content = dict(offer.get("content") or {})
        if isinstance(throughput, ThroughputProperties):
            throughput = throughput.offer_throughput
        content["offerThroughput"] = int(throughput)
        offer["content"] = content
        req = Request("PUT", link_path("offers", offer["_rid"]), "replace_offer",
                      {"content-type": "application/json"}, dumps(offer), is_write=True, **request_options(kwargs))
        reply, diag = await self.client._pipeline.execute(req)
        return ThroughputProperties(body_json(reply) or {}, diag)
