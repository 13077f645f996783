"""The public surface of azure-cosmos (the installed version) against the bundled client's.

    .venv/bin/python tests/sdk_surface.py          # what ours lacks, one name a line

For the main classes (CosmosClient, DatabaseProxy, ContainerProxy, sync and aio) it lists every
public method the SDK has and ours does not, and every keyword an SDK method takes (its
signature's, and the `:keyword name:` entries of its docstring, since many take **kwargs) that
ours does not implement; for the packages and the exceptions module, the public names ours does not
export. A keyword counts as implemented when our method names it, or takes **kwargs and so the
request options every operation takes (client/aio/options.py REQUEST_OPTIONS); a keyword ours
refuses with NotImplementedError is not implemented. Names are written as docs/client.md lists
them: `ContainerProxy.get_conflict`, `ContainerProxy.query_items(feed_range=)`,
`azure.cosmos.ScriptsProxy`. tests/unit/client/test_sdk_surface_list.py holds the doc to it.
"""
import inspect
import re

import azure.cosmos
import azure.cosmos.aio
import azure.cosmos.exceptions

import regionlab.client
import regionlab.client.aio
import regionlab.client.exceptions
from regionlab.client.aio import options
from regionlab.client.aio.client import CosmosClient as OurClient, _CONSTRUCTOR_KEYWORDS
from regionlab.client.aio.container import ContainerProxy as OurContainer
from regionlab.client.aio.changefeed import ChangeFeed
from regionlab.client.aio.database import DatabaseProxy as OurDatabase, _CONTAINER_FIELDS
from regionlab.client import sync

MAIN_CLASSES = ("CosmosClient", "DatabaseProxy", "ContainerProxy")
_OURS = {"CosmosClient": OurClient, "DatabaseProxy": OurDatabase, "ContainerProxy": OurContainer}
_OURS_SYNC = {"CosmosClient": sync.CosmosClient, "DatabaseProxy": sync.DatabaseProxy,
              "ContainerProxy": sync.ContainerProxy}
# Keywords our methods take out of **kwargs themselves
_DEFINITION = set(_CONTAINER_FIELDS)
_EXTRA = {("DatabaseProxy", "create_container"): _DEFINITION,
          ("DatabaseProxy", "create_container_if_not_exists"): _DEFINITION,
          ("DatabaseProxy", "replace_container"): _DEFINITION,
          ("ContainerProxy", "query_items_change_feed"):
              set(inspect.signature(ChangeFeed.__init__).parameters) - {"self", "container", "kwargs"}}
_KEYWORD_DOC = re.compile(r":keyword\s+(?:[^:]*?\s)?(\w+):")
_IGNORED = {"self", "args", "kwargs"}


def public_methods(cls) -> dict:
    return {name: member for name, member in inspect.getmembers(cls)
            if not name.startswith("_") and (callable(member) or isinstance(member, property))}


def sdk_keywords(member) -> set[str]:
    """The keywords an SDK method takes: its signature's and its docstring's."""
    if isinstance(member, property) or not callable(member):
        return set()
    init = member.__init__ if inspect.isclass(member) else member
    params = inspect.signature(init).parameters.values()
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    names |= set(_KEYWORD_DOC.findall(inspect.getdoc(member) or ""))     # a class documents its __init__
    return names - _IGNORED


def our_keywords(member, constructor: bool = False) -> set[str]:
    """The keywords our method implements (refused ones excluded)."""
    if isinstance(member, property) or not callable(member):
        return set()
    params = inspect.signature(member).parameters.values()
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if constructor:
        return (names | set(_CONSTRUCTOR_KEYWORDS) | options.RETRY_KEYWORDS | {"connection_timeout",
                "read_timeout", "request_timeout", "retry_write"}) - _IGNORED
    if any(p.kind == p.VAR_KEYWORD for p in params):
        names |= options.REQUEST_OPTIONS
    return names - _IGNORED


def missing() -> list[str]:
    """What ours lacks, sorted: methods, keywords, then exported names."""
    out = set()
    for sdk_module in (azure.cosmos, azure.cosmos.aio):
        for cls_name in MAIN_CLASSES:
            sdk_cls, ours = getattr(sdk_module, cls_name), _OURS[cls_name]
            ours_sync = _OURS_SYNC[cls_name]
            for name, member in public_methods(sdk_cls).items():
                mine = getattr(ours, name, None)
                if mine is None or (sdk_module is azure.cosmos and not hasattr(ours_sync, name)):
                    out.add(f"{cls_name}.{name}")
                    continue
                for kw in sorted(sdk_keywords(member) - our_keywords(mine) - _EXTRA.get((cls_name, name), set())):
                    out.add(f"{cls_name}.{name}({kw}=)")
            if cls_name == "CosmosClient":           # the proxies are made by the client, not by hand
                for kw in sorted(sdk_keywords(sdk_cls) - our_keywords(ours.__init__, constructor=True)):
                    out.add(f"CosmosClient({kw}=)")
    for sdk_module, our_module in ((azure.cosmos, regionlab.client), (azure.cosmos.aio, regionlab.client.aio),
                                   (azure.cosmos.exceptions, regionlab.client.exceptions)):
        for name in dir(sdk_module):
            value = getattr(sdk_module, name)
            if name.startswith("_") or inspect.ismodule(value) or name == "VERSION":
                continue
            if sdk_module is azure.cosmos.exceptions and not inspect.isclass(value):
                continue
            if not hasattr(our_module, name):
                out.add(f"{sdk_module.__name__}.{name}")
    return sorted(out)


if __name__ == "__main__":
    print(f"azure-cosmos {azure.cosmos.VERSION}: what regionlab's client lacks")
    for line in missing():
        print(line)
