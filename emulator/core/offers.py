"""Offers: the provisioned throughput of a database or container, manual or autoscale.

An offer is addressed by its own rid (`offers/<rid>`) and names its resource by `_self`. The
RU budgets of the throughput issue read `throughput`; replacing an offer changes it at once.
"""
from .errors import bad_request
from .limits import AUTOSCALE_MAX_THROUGHPUT_MIN_RU_PER_S, THROUGHPUT_MAX_RU_PER_S, THROUGHPUT_MIN_RU_PER_S



class Offer:
    __slots__ = ("rid", "resource", "resource_rid", "throughput", "autoscale_max", "etag", "ts")

    def __init__(self, rid, resource, resource_rid, throughput, autoscale_max, etag, ts):
        self.rid = rid
        self.resource = resource
        self.resource_rid = resource_rid
        self.throughput = throughput
        self.autoscale_max = autoscale_max
        self.etag = etag
        self.ts = ts
        check_throughput(throughput, autoscale_max)

    def properties(self) -> dict:
        content = {"offerThroughput": self.throughput if self.autoscale_max is None
                   else max(self.autoscale_max // 10, THROUGHPUT_MIN_RU_PER_S)}
        if self.autoscale_max is not None:
            content["offerAutopilotSettings"] = {"maxThroughput": self.autoscale_max}
        return {"id": self.rid, "_rid": self.rid, "_self": f"offers/{self.rid}/", "_etag": self.etag,
                "_ts": self.ts, "resource": self.resource, "offerResourceId": self.resource_rid,
                "offerType": "Invalid", "offerVersion": "V2", "content": content}

    def replace(self, body: dict) -> None:
        content = body.get("content") if isinstance(body, dict) else None
        if not isinstance(content, dict):
            raise bad_request("An offer replace needs a body with a 'content' object.")
        auto = content.get("offerAutopilotSettings")
        if isinstance(auto, dict) and auto.get("maxThroughput") is not None:
            check_throughput(None, auto["maxThroughput"])
            self.autoscale_max, self.throughput = int(auto["maxThroughput"]), None
        elif content.get("offerThroughput") is not None:
            check_throughput(content["offerThroughput"], None)
            self.throughput, self.autoscale_max = int(content["offerThroughput"]), None
        else:
            raise bad_request("An offer replace needs content.offerThroughput or "
                              "content.offerAutopilotSettings.maxThroughput.")


def check_throughput(throughput, autoscale_max) -> None:
    """400 unless each given value is an integer within the service's range."""
    low, high = THROUGHPUT_MIN_RU_PER_S, THROUGHPUT_MAX_RU_PER_S
    if throughput is not None and (type(throughput) is not int or not low <= throughput <= high):
        raise bad_request(f"Throughput must be an integer from {low} to {high} RU/s, got {_shown(throughput)}.")
    low = AUTOSCALE_MAX_THROUGHPUT_MIN_RU_PER_S
    if autoscale_max is not None and (type(autoscale_max) is not int or not low <= autoscale_max <= high):
        raise bad_request(f"Autoscale max throughput must be an integer from {low} to {high} RU/s, "
                          f"got {_shown(autoscale_max)}.")


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
