"""What operations return: the reply's JSON with its diagnostics and request charge attached,
as the official SDK's CosmosDict/CosmosList carry their headers."""
import json


class CosmosDict(dict):
    def __init__(self, data, headers=None, diagnostics=None):
        super().__init__(data or {})
        self._headers = headers
        self.diagnostics = diagnostics

    @property
    def request_charge(self) -> float:
        return self.diagnostics.request_charge if self.diagnostics else 0.0

    def get_response_headers(self) -> dict:
        return dict(self._headers or {})


class CosmosList(list):
    def __init__(self, data, headers=None, diagnostics=None):
        super().__init__(data or [])
        self._headers = headers
        self.diagnostics = diagnostics

    @property
    def request_charge(self) -> float:
        return self.diagnostics.request_charge if self.diagnostics else 0.0

    def get_response_headers(self) -> dict:
        return dict(self._headers or {})


def body_json(reply):
    return json.loads(reply.body) if reply.body else None


def as_dict(reply, diag) -> CosmosDict:
    data = body_json(reply)
    return CosmosDict(data if isinstance(data, dict) else {}, reply.headers, diag)


def dumps(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")
