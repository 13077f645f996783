"""A transactional batch's or a bulk call's operation as the wire carries it (`operationType`,
`id`, `resourceBody`, `ifMatch`), from the tuple azure-cosmos's `execute_item_batch` takes:
`("create", (body,), {"if_match_etag": ...})`. Both container.py (batch) and bulk.py use it."""

# The operation names the tuples and bulk's JS-style dicts use (any case) -> the wire's.
OPERATION_TYPES = {"create": "Create", "upsert": "Upsert", "read": "Read", "replace": "Replace",
                   "delete": "Delete", "patch": "Patch"}


def from_batch_tuple(op) -> dict:
    kind, args = op[0], op[1]
    options = op[2] if len(op) > 2 else {}
    out = {"operationType": OPERATION_TYPES[kind.lower()]}
    if kind.lower() in ("create", "upsert"):
        out["resourceBody"] = args[0]
    elif kind.lower() in ("read", "delete"):
        out["id"] = args[0]
    elif kind.lower() == "replace":
        out["id"], out["resourceBody"] = args[0], args[1]
    else:
        out["id"], out["resourceBody"] = args[0], {"operations": args[1]}
        if options.get("filter_predicate"):
            out["resourceBody"]["condition"] = options["filter_predicate"]
    if options.get("if_match_etag"):
        out["ifMatch"] = options["if_match_etag"]
    return out
