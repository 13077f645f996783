"""JSON values as the query language sees them.

Theory of operation: documents arrive as plain Python JSON values (dict, list,
str, int, float, bool, None). The query language adds one more value,
`undefined`, for "no value at all" (a missing property, a type error, a failed
comparison). It is represented by the singleton `UNDEFINED`, never by None,
which means JSON null.

Every value has a type tag, an int whose order is the service's cross-type
sort order: undefined < null < boolean < number < string < array < object.
Because Python's bool is a subclass of int, the tag is looked up by exact
`type(v)`, never with isinstance, so `true` is never mistaken for 1.

This module owns three notions of sameness that the rest of the engine uses:
* `json_equal` - the `=` operator on two values of the same type (deep for
  arrays and objects, key order of objects ignored, 1 == 1.0);
* `canonical` - a hashable stand-in for a value such that two values are
  json_equal exactly when their canonical forms are equal (DISTINCT, GROUP BY);
* `sort_key` - a totally ordered stand-in used by ORDER BY, MIN and MAX.
Nothing here mutates its inputs.
"""

from __future__ import annotations


class _Undefined:
    """The query language's `undefined`; falsy, printable, a singleton."""

    __slots__ = ()
    _instance: "_Undefined | None" = None

    def __new__(cls) -> "_Undefined":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "undefined"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self):
        return (_Undefined, ())


UNDEFINED = _Undefined()

TAG_UNDEFINED = 0
TAG_NULL = 1
TAG_BOOL = 2
TAG_NUMBER = 3
TAG_STRING = 4
TAG_ARRAY = 5
TAG_OBJECT = 6

TYPE_TAGS: dict[type, int] = {
    _Undefined: TAG_UNDEFINED,
    type(None): TAG_NULL,
    bool: TAG_BOOL,
    int: TAG_NUMBER,
    float: TAG_NUMBER,
    str: TAG_STRING,
    list: TAG_ARRAY,
    tuple: TAG_ARRAY,
    dict: TAG_OBJECT,
}

# Python types that make up each tag; used to build fast `type(v) in ...` checks.
TYPES_OF_TAG: dict[int, frozenset] = {
    TAG_NULL: frozenset({type(None)}),
    TAG_BOOL: frozenset({bool}),
    TAG_NUMBER: frozenset({int, float}),
    TAG_STRING: frozenset({str}),
    TAG_ARRAY: frozenset({list, tuple}),
    TAG_OBJECT: frozenset({dict}),
}

NUMBER_TYPES = TYPES_OF_TAG[TAG_NUMBER]


def tag_of(value) -> int:
    """The type tag of a value; unknown Python types count as undefined."""
    return TYPE_TAGS.get(type(value), TAG_UNDEFINED)


def is_number(value) -> bool:
    return type(value) in NUMBER_TYPES


def canonical(value):
    """A hashable form: equal exactly when the values are json_equal."""
    tag = TYPE_TAGS.get(type(value), TAG_UNDEFINED)
    if tag == TAG_ARRAY:
        return (TAG_ARRAY, tuple(canonical(item) for item in value))
    if tag == TAG_OBJECT:
        return (TAG_OBJECT, frozenset((k, canonical(v)) for k, v in value.items()))
    if tag == TAG_UNDEFINED:
        return (TAG_UNDEFINED, None)
    return (tag, value)


def json_equal(left, right) -> bool:
    """Deep equality of two values that are already known to share a tag."""
    if type(left) in (list, tuple, dict):
        return canonical(left) == canonical(right)
    return left == right


def sort_key(value):
    """A key ordering all values: by type tag first, then within the type.

    Arrays compare element by element and objects by their sorted
    (name, value) pairs; the service leaves those orders unspecified but a
    total, deterministic order keeps results reproducible.
    """
    tag = TYPE_TAGS.get(type(value), TAG_UNDEFINED)
    if tag == TAG_ARRAY:
        return (TAG_ARRAY, tuple(sort_key(item) for item in value))
    if tag == TAG_OBJECT:
        return (TAG_OBJECT, tuple(sorted((k, sort_key(v)) for k, v in value.items())))
    if tag == TAG_UNDEFINED or tag == TAG_NULL:
        return (tag, 0)
    return (tag, value)

