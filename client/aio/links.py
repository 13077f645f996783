"""Resource links and request paths: ids are percent-encoded in paths, kept raw in links."""
from urllib.parse import quote


def database_link(db: str) -> str:
    return f"dbs/{db}"


def container_link(db: str, coll: str) -> str:
    return f"dbs/{db}/colls/{coll}"


def path(*segments: str) -> str:
    return "/" + "/".join(quote(s, safe="") for s in segments)


def item_path(coll_link: str, item_id: str) -> str:
    return "/" + "/".join(quote(s, safe="") for s in coll_link.split("/")) + "/docs/" + quote(item_id, safe="")


def link_path(link: str, *tail: str) -> str:
    return "/" + "/".join(quote(s, safe="") for s in link.split("/") + list(tail))
