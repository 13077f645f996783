"""Item versions of one physical partition in one region, shared by its four replicas.

Theory of operation: every committed write produces immutable `Version`s (the document as
stored, its serialised body, etag, timestamp, or a tombstone) stamped with the write's LSN.
A replica's state is just the LSN it has applied up to; what it "has" is, per item, the newest
version with `lsn <= that LSN`. So the twelve replicas of a three-region account cost little
more memory than one copy, and replicating a write is moving a number.

Invariants:
* per key, versions are kept in strictly increasing LSN order;
* a version is dropped only when no reader can see it any more: it is older than the newest
  version visible at the lowest LSN any replica is read at (`ReplicaSet.floor_lsn`: the
  lowest applied LSN, capped by the committed LSN);
* `truncate_after(lsn)` removes versions above lsn (a primary that lost its unacknowledged
  tail in an election); nothing acknowledged is ever above the new primary's LSN.

Keys are (partition key JSON, id): ids are unique per logical partition. The key order is what
read-feed paging walks, so a continuation is just the last key returned.
"""
from sortedcontainers import SortedDict


class Version:
    __slots__ = ("lsn", "key", "doc", "body", "etag", "ts", "deleted", "rid")

    def __init__(self, lsn: int, key: tuple, doc: dict | None, body: bytes | None,
                 etag: str, ts: int, rid: str, deleted: bool = False):
        self.lsn = lsn
        self.key = key
        self.doc = doc
        self.body = body
        self.etag = etag
        self.ts = ts
        self.rid = rid
        self.deleted = deleted

    def with_lsn(self, lsn: int) -> "Version":
        return Version(lsn, self.key, self.doc, self.body, self.etag, self.ts, self.rid, self.deleted)


class VersionStore:
    __slots__ = ("_items", "count_live")

    def __init__(self):
        self._items: SortedDict = SortedDict()
        self.count_live = 0

    def add(self, version: Version, floor_lsn: int) -> None:
        versions = self._items.get(version.key)
        if versions is None:
            if not version.deleted:
                self._items[version.key] = [version]
                self.count_live += 1
            return
        prev = versions[-1]
        if prev.deleted and not version.deleted:
            self.count_live += 1
        elif version.deleted and not prev.deleted:
            self.count_live -= 1
        versions.append(version)
        self._prune(version.key, versions, floor_lsn)

    def _prune(self, key, versions: list, floor_lsn: int) -> None:
        # Keep the newest version visible at floor_lsn and everything after it.
        keep_from = 0
        for i in range(len(versions) - 1, -1, -1):
            if versions[i].lsn <= floor_lsn:
                keep_from = i
                break
        if keep_from:
            del versions[:keep_from]
        if len(versions) == 1 and versions[0].deleted and versions[0].lsn <= floor_lsn:
            del self._items[key]

    def get(self, key: tuple, lsn: int) -> Version | None:
        """The live version of key visible at lsn, or None."""
        versions = self._items.get(key)
        if versions is None:
            return None
        for i in range(len(versions) - 1, -1, -1):
            v = versions[i]
            if v.lsn <= lsn:
                return None if v.deleted else v
        return None

    def latest(self, key: tuple) -> Version | None:
        versions = self._items.get(key)
        if not versions or versions[-1].deleted:
            return None
        return versions[-1]

    def scan(self, lsn: int, after_key: tuple | None = None, prefix: str | None = None):
        """Live versions visible at lsn in key order, starting after `after_key`.
        With `prefix`, only keys of that partition key (JSON) are visited."""
        items = self._items
        if prefix is not None:
            start = (prefix, "") if after_key is None else after_key
            keys = items.irange(minimum=start, inclusive=(after_key is None, False))
        elif after_key is None:
            keys = items.keys()
        else:
            keys = items.irange(minimum=after_key, inclusive=(False, False))
        for key in keys:
            if prefix is not None and key[0] != prefix:
                break
            v = self.get(key, lsn)
            if v is not None:
                yield v

    def truncate_after(self, lsn: int) -> None:
        dead = []
        for key, versions in self._items.items():
            while versions and versions[-1].lsn > lsn:
                versions.pop()
            if not versions:
                dead.append(key)
        for key in dead:
            del self._items[key]
        self.count_live = sum(1 for vs in self._items.values() if not vs[-1].deleted)

    def keys_with_versions(self):
        return self._items.items()
