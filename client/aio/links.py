"""Resource links and request paths: ids are percent-encoded in paths, kept raw in links."""
from functools import lru_cache
from urllib.parse import quote as _quote

QUOTED_SEGMENTS_CACHED_MAX = 4096


@lru_cache(maxsize=QUOTED_SEGMENTS_CACHED_MAX)
def quote(segment: str, safe: str = "") -> str:
    return _quote(segment, safe=safe)


def database_link(db: str) -> str:
    return f"dbs/{db}"


def container_link(db: str, coll: str) -> str:
    return f"dbs/{db}/colls/{coll}"


def path(*segments: str) -> str:
    return "/" + "/".join(quote(s, safe="") for s in segments)


def item_path(coll_link: str, item_id: str) -> str:
    return link_path(coll_link, "docs") + "/" + quote(item_id)


@lru_cache(maxsize=QUOTED_SEGMENTS_CACHED_MAX)
def link_path(link: str, *tail: str) -> str:
    return "/" + "/".join(quote(s, safe="") for s in link.split("/") + list(tail))
