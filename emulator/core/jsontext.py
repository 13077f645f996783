"""Compact JSON text, as stored items and partition keys are written.

`dumps(value)` is `json.dumps(value, separators=(",", ":"), ensure_ascii=False)` without the
cost of building an encoder on every call: JSONEncoder.encode makes a new C encoder (and a
dict for circular-reference checks) each time, which is a quarter of the cost of encoding a
small item. Here the C encoder is built once, without the circular check: values come from
the JSON decoder or from patch operations on them, so they cannot contain themselves.
"""
import json
import json.encoder as _encoder


def _unencodable(value):
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


if _encoder.c_make_encoder is not None:
    _C = _encoder.c_make_encoder(None, _unencodable, _encoder.encode_basestring, None,
                                 ":", ",", False, False, True)

    def dumps(value) -> str:
        return "".join(_C(value, 0))
else:                                       # an interpreter without the C accelerator
    dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def dumps_bytes(value) -> bytes:
    """dumps(value) as UTF-8."""
    return dumps(value).encode()
