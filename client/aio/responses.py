"""What operations return: the reply's JSON with its diagnostics and request charge attached,
as the official SDK's CosmosDict/CosmosList carry their headers."""
import json

from regionlab.client.headers import ResponseHeaders


class _Reply:
    """What both reply shapes carry besides their data."""

    def _attach(self, headers, diagnostics) -> None:
        self._headers = headers
        self.diagnostics = diagnostics

    @property
    def request_charge(self) -> float:
        return self.diagnostics.request_charge if self.diagnostics else 0.0

    def get_response_headers(self) -> ResponseHeaders:
        return ResponseHeaders(self._headers)


class CosmosDict(_Reply, dict):
    def __init__(self, data, headers=None, diagnostics=None):
        super().__init__(data or {})
        self._attach(headers, diagnostics)


class CosmosList(_Reply, list):
    def __init__(self, data, headers=None, diagnostics=None):
        super().__init__(data or [])
        self._attach(headers, diagnostics)


def body_json(reply):
    return json.loads(reply.body) if reply.body else None


def as_dict(reply, diag) -> CosmosDict:
    data = body_json(reply)
    return CosmosDict(data if isinstance(data, dict) else {}, reply.headers, diag)


def dumps(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")
