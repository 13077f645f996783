"""Proves response headers as callers get them (client/headers.py) match names in any case, as
azure-core's CaseInsensitiveDict does, while staying a dict: by building one and reading it."""
from regionlab.client.exceptions import CosmosHttpResponseError
from regionlab.client.headers import ResponseHeaders


def test_names_match_in_any_case_and_it_is_a_dict():
    h = ResponseHeaders({"ETag": '"1"', "x-ms-request-charge": "1.5"})
    assert isinstance(h, dict) and dict(h) == {"etag": '"1"', "x-ms-request-charge": "1.5"}
    assert h["etag"] == h["ETAG"] == '"1"' and h.get("X-MS-Request-Charge") == "1.5"
    assert "Etag" in h and "nope" not in h and 3 not in h and h.get(3, "d") == "d"
    h["Content-Type"] = "application/json"
    assert h["content-type"] == "application/json"
    del h["CONTENT-TYPE"]
    assert "content-type" not in h and h.pop("ETag") == '"1"' and h.pop("etag", None) is None


def test_an_errors_headers_match_in_any_case():
    e = CosmosHttpResponseError(404, "gone", headers={"x-ms-substatus": "0"})
    assert e.headers["X-MS-Substatus"] == "0"
