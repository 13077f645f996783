"""Throughput (offers) of a database or container: read by querying /offers for the resource's
`_self`, replaced with a PUT of the offer with the new number. Manual (`offer_throughput`) or
autoscale (`auto_scale_max_throughput`), as azure-cosmos's ThroughputProperties."""
import json

from regionlab.client.exceptions import CosmosResourceNotFoundError
from regionlab.client.protocol import headers as H, status as S

from .links import link_path
from .request import Request, request_options
from .responses import CosmosDict, body_json, dumps


class ThroughputProperties:
    """As azure-cosmos's: `ThroughputProperties(offer_throughput=400)` or
    `ThroughputProperties(auto_scale_max_throughput=4000)` to create or replace with; read back
    with the offer in `properties`, its `diagnostics` and `request_charge`. An autoscale offer
    has no `offer_throughput`, as in the SDK."""

    def __init__(self, *args, diagnostics=None, **kwargs):
        self.offer_throughput = args[0] if args else kwargs.get("offer_throughput")
        self.properties = args[1] if len(args) > 1 else kwargs.get("properties")
        self.auto_scale_max_throughput = kwargs.get("auto_scale_max_throughput")
        self.auto_scale_increment_percent = kwargs.get("auto_scale_increment_percent")
        self.diagnostics = diagnostics

    @classmethod
    def of_offer(cls, offer: dict, diagnostics=None, headers=None) -> "ThroughputProperties":
        content = offer.get("content") or {}
        auto = content.get("offerAutopilotSettings") or {}
        props = CosmosDict(offer, headers, diagnostics)
        if auto.get("maxThroughput") is not None:
            return cls(properties=props, auto_scale_max_throughput=auto["maxThroughput"],
                       auto_scale_increment_percent=((auto.get("autoUpgradePolicy") or {}).get("throughputPolicy")
                                                     or {}).get("incrementPercent"), diagnostics=diagnostics)
        return cls(content.get("offerThroughput"), props, diagnostics=diagnostics)

    @property
    def request_charge(self) -> float:
        return self.diagnostics.request_charge if self.diagnostics else 0.0

    def get_response_headers(self):
        return self.properties.get_response_headers() if isinstance(self.properties, CosmosDict) else {}


def throughput_headers(throughput) -> dict:
    """The create request's headers for `offer_throughput=` (RU/s, or a ThroughputProperties)."""
    if throughput is None:
        return {}
    if isinstance(throughput, ThroughputProperties):
        if throughput.auto_scale_max_throughput is not None:
            return {H.OFFER_AUTOPILOT: json.dumps({"maxThroughput": int(throughput.auto_scale_max_throughput)})}
        throughput = throughput.offer_throughput
        if throughput is None:
            return {}
    return {H.OFFER_THROUGHPUT: str(int(throughput))}


def _replaced_content(content: dict, throughput) -> dict:
    """The offer's content with the new throughput (as azure-cosmos's _replace_throughput)."""
    content = dict(content)
    if isinstance(throughput, ThroughputProperties):
        if throughput.auto_scale_max_throughput is not None:
            auto = dict(content.get("offerAutopilotSettings") or {})
            auto["maxThroughput"] = int(throughput.auto_scale_max_throughput)
            content["offerAutopilotSettings"] = auto
            content.pop("offerThroughput", None)
            return content
        throughput = throughput.offer_throughput
    if isinstance(throughput, bool) or not isinstance(throughput, int):
        raise TypeError("throughput must be an int (RU/s) or a ThroughputProperties")
    content["offerThroughput"] = throughput
    content.pop("offerAutopilotSettings", None)
    return content


class Throughput:
    """Mixed into the database and container proxies (each has `client`, `_props` and
    `_offer_resource`)."""

    @property
    def diagnostics(self):
        """The diagnostics of the request that made or last read this database or container
        (None for a proxy from get_*_client that has not been read)."""
        return self._props.diagnostics if self._props is not None else None

    @property
    def request_charge(self) -> float:
        return self._props.request_charge if self._props is not None else 0.0

    async def _offer(self, **kwargs):
        resource = await self._offer_resource()
        body = dumps({"query": "SELECT * FROM root r WHERE r.resource=@link",
                      "parameters": [{"name": "@link", "value": resource}]})
        req = Request("POST", "/offers", "read_offer",
                      {"content-type": "application/query+json", "x-ms-documentdb-isquery": "True"}, body,
                      **request_options(kwargs, "get_throughput"))
        reply, diag = await self.client._pipeline.execute(req)
        offers = (body_json(reply) or {}).get("Offers", [])
        if not offers:
            raise CosmosResourceNotFoundError(S.NOT_FOUND, f"{resource} has no throughput of its own",
                                              sub_status=S.SUB_THROUGHPUT_OFFER_NOT_FOUND,
                                              diagnostics=diag, request_charge=diag.request_charge)
        return offers[0], diag

    async def get_throughput(self, **kwargs) -> ThroughputProperties:
        offer, diag = await self._offer(**kwargs)
        return ThroughputProperties.of_offer(offer, diag)

    read_offer = get_throughput          # the SDK's older name

    async def replace_throughput(self, throughput, **kwargs) -> ThroughputProperties:
        offer, _ = await self._offer(**kwargs)
        offer = dict(offer)
        offer["content"] = _replaced_content(offer.get("content") or {}, throughput)
        req = Request("PUT", link_path("offers", offer["_rid"]), "replace_offer",
                      {"content-type": "application/json"}, dumps(offer), is_write=True,
                      **request_options(kwargs, "replace_throughput"))
        reply, diag = await self.client._pipeline.execute(req)
        # As azure-cosmos's replace_throughput: the offer's current RU/s (an autoscale offer's
        # too), with the offer in `properties` (its autoscale settings are there).
        offer = body_json(reply) or {}
        return ThroughputProperties((offer.get("content") or {}).get("offerThroughput"),
                                    CosmosDict(offer, reply.headers, diag), diagnostics=diag)
