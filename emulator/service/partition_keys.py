"""The partition key header (`x-ms-documentdb-partitionkey`) as the core needs it.

The header is a JSON array (cosmos-wire §9): `["p1"]`, `[5]`, `[null]`, `[{}]` (undefined),
or several values for a hierarchical key. Anything else is a 400 saying that shape, never a
500: the header is decoded like a body (core/validation.py), so deep nesting, lone
surrogates and numbers beyond a double's range are refused with a message. Parsed results
are cached by the raw header text, since clients send the same few keys again and again
(bounded in bytes: core/cache.py; a header that is refused is not kept).
"""
import json

from regionlab.client.protocol import headers as H

from ..core.cache import Cache, text_bytes
from ..core.container import canonical_pk_json
from ..core.epk import UNDEFINED
from ..core.errors import bad_request
from ..core.validation import ValidationError, check_numbers_in_double_range, parse_json_body
from ..core.limits import PARTITION_KEYS_CACHE_MAX_BYTES

_VALUE_BYTES = 64                           # a value's slot in its list, beyond its own object
_cache = Cache(PARTITION_KEYS_CACHE_MAX_BYTES)
_SHAPE = ("A partition key must be a JSON array of one or more scalar values (strings, numbers, "
          "booleans, null or {} for undefined), such as [\"p1\"] or [\"tenant\", 5]")
parsed = _cache.get          # raw header -> what parse() returned for it, or None (a caller's inlined hit)


def parse(raw: str) -> tuple[str, list]:
    hit = _cache.get(raw)
    if hit is not None:
        return hit
    values = _decode(raw)
    for v in values:
        if isinstance(v, list) or (isinstance(v, dict) and v):
            raise bad_request(f"{_SHAPE}; got the component {_shown(v)}.")
    values = [UNDEFINED if v == {} else v for v in values]
    pk_json = canonical_pk_json(values)
    nbytes = text_bytes(raw, pk_json) + _VALUE_BYTES * len(values)
    for v in values:
        if type(v) is str:
            nbytes += text_bytes(v)
    return _cache.put(raw, (pk_json, values), nbytes)


def _decode(raw: str) -> list:
    """The header's JSON through the same checks as a body (UTF-8, no lone surrogates, finite
    numbers, bounded nesting, no recursion), plus: a number must fit in a double, since the
    service hashes partition key numbers as doubles."""
    try:
        values = parse_json_body(raw.encode("utf-8", "surrogatepass"))
        check_numbers_in_double_range(values)
    except ValidationError as e:
        raise bad_request(f"{_SHAPE}; the x-ms-documentdb-partitionkey header '{raw[:100]}' is not: "
                          f"{e.message}") from None
    if not isinstance(values, list):
        raise bad_request(f"{_SHAPE}; got '{raw[:100]}'.")
    return values


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def required(call, container, full: bool = True) -> tuple[str, list]:
    raw = call.header(H.PARTITION_KEY)
    if raw is None:
        raise missing()
    return checked(container, *parse(raw), full)


def missing():
    """The 400 of an operation that needs a partition key and got none."""
    return bad_request("PartitionKey value must be supplied for this operation: send the "
                       "x-ms-documentdb-partitionkey header, e.g. [\"p1\"].")


def of_operation(container, raw) -> tuple[str, list]:
    """The partition key of one bulk operation: its `partitionKey` member, the header's JSON text
    (the JS SDK sends it so), or the array itself."""
    if isinstance(raw, list):
        raw = json.dumps(raw)
    if not isinstance(raw, str):
        raise bad_request('A bulk operation needs its "partitionKey", a JSON array as text such as "[\\"p1\\"]".')
    return checked(container, *parse(raw), True)


def checked(container, pk_json: str, values: list, full: bool = True) -> tuple[str, list]:
    paths = container.pk_def.paths
    if (full and len(values) != len(paths)) or len(values) > len(paths) or not values:
        raise bad_request(f"The partition key {pk_json} has {len(values)} value(s) but the container's "
                          f"partition key has {len(paths)} path(s): {', '.join(paths)}.")
    return pk_json, values
