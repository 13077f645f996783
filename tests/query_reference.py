"""What both query corpora's plain-Python references share (tests/integration/sdk_corpus_docs.py
for the SDK corpus, tests/unit/core/query/query_corpus_data.py for the engine's): the reference's
own "undefined", and the naive path lookup, number test and projection they spell the service's
rules out with, so that expected results never come from the engine under test."""

MISSING = object()   # the reference's own "undefined"


def get(value, *path):
    """Follow names / indexes; MISSING when any step is absent or of the wrong kind."""
    for step in path:
        if isinstance(step, str):
            value = value.get(step, MISSING) if type(value) is dict else MISSING
        else:
            value = value[step] if type(value) is list and 0 <= step < len(value) else MISSING
    return value


def is_num(v) -> bool:
    return type(v) in (int, float)


def row(**fields) -> dict:
    """A projected row: undefined members are left out."""
    return {k: v for k, v in fields.items() if v is not MISSING}
