"""Proves charge.py follows the cost model docs/throughput.md states: the published anchors (1 KB
read = 1 RU, 100 KB read ~10 RU, 1 KB write ~5-6 RU, 100 KB write ~50 RU, replace ~2x create),
monotonic growth with size and with indexed terms, excluded paths and `indexingMode: none`
making writes cheaper, and staged-writer charges (create, replace, upsert, patch, delete, delete
by partition key) computed before commit from what the Writer staged, with nothing applied."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from regionlab.emulator.core import charge, jsontext

from core_world import World

KB = 1024
ONLY_PK = {"indexingMode": "consistent", "includedPaths": [{"path": "/pk/?"}],
           "excludedPaths": [{"path": "/*"}]}
NONE = {"indexingMode": "none", "automatic": False, "includedPaths": [], "excludedPaths": []}


def test_published_anchors():
    assert charge.read(1 * KB) == 1.0
    assert 9.5 <= charge.read(100 * KB) <= 10.5
    assert 5.0 <= charge.write(1 * KB) <= 6.5
    assert 45 <= charge.write(100 * KB) <= 55
    assert 1.6 <= charge.replace(1 * KB) / charge.write(1 * KB) <= 2.0
    assert charge.delete(1 * KB) == charge.write(1 * KB)
    assert charge.read(0) == charge.read(1) == 1.0          # a miss or a tiny item: the floor


@given(st.integers(0, 2 * 1024 * KB), st.integers(0, 2 * 1024 * KB), st.integers(0, 500))
def test_charges_grow_with_size_and_terms(a, b, terms):
    small, big = sorted((a, b))
    assert charge.read(small) <= charge.read(big)
    assert charge.write(small, terms) <= charge.write(big, terms)
    assert charge.write(big, terms) < charge.write(big, terms + 1)
    assert charge.write(big, terms) < charge.replace(big, terms)


def test_index_terms_follow_the_policy():
    doc = {"id": "a", "pk": "p", "n": 1, "tags": ["x", "y", "z"], "address": {"city": "c", "zip": 1},
           "empty": {}, "_rid": "r", "_etag": "e", "_ts": 1, "_self": "s", "_attachments": "a/"}
    default = {"indexingMode": "consistent", "includedPaths": [{"path": "/*"}],
               "excludedPaths": [{"path": '/"_etag"/?'}]}
    assert charge.index_terms(doc, default) == 8 + 1                    # 8 scalars + _ts
    assert charge.index_terms(doc, None) == 9                           # no policy: index everything
    assert charge.index_terms(doc, ONLY_PK) == 3                        # pk, plus id and _ts always
    assert charge.index_terms(doc, NONE) == 0
    no_address = dict(default, excludedPaths=[{"path": "/address/*"}])
    assert charge.index_terms(doc, no_address) == 7
    only_tags = {"includedPaths": [{"path": "/tags/[]/?"}], "excludedPaths": [{"path": "/*"}]}
    assert charge.index_terms(doc, only_tags) == 3 + 2


def _terms_walked(doc: dict) -> int:
    """The default policy's terms, counted by walking every value: what index_terms counts."""
    def scalars(v):
        if isinstance(v, dict):
            return sum(map(scalars, v.values()))
        if isinstance(v, list):
            return sum(map(scalars, v))
        return 1
    return 1 + sum(scalars(v) for k, v in doc.items() if k not in charge.SYSTEM_PROPERTIES)


_leaf = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
         | st.text(st.sampled_from("ab{[]}"), max_size=3))
_names = st.sampled_from(sorted(charge.SYSTEM_PROPERTIES)) | st.text(max_size=4)


@given(st.dictionaries(_names, _leaf | st.lists(_leaf, max_size=3) | st.dictionaries(st.text(max_size=2), _leaf,
                                                                                     max_size=3), max_size=8),
       st.booleans())
def test_index_terms_of_flat_and_nested_documents_count_every_scalar(doc, flat):
    """The flat shortcut (no loop, told by the body) and the walk agree with counting every
    scalar, system properties (whatever their values) left out; a string holding a bracket is
    no object."""
    if flat:
        doc = {k: v for k, v in doc.items() if not isinstance(v, (dict, list))}
    default = {"indexingMode": "consistent", "includedPaths": [{"path": "/*"}],
               "excludedPaths": [{"path": '/"_etag"/?'}]}
    body = jsontext.dumps_bytes(doc)          # what a staged version holds beside its document
    assert charge.index_terms(doc, default, body) == charge.index_terms(doc, None, body) == _terms_walked(doc)
    assert charge.index_terms(doc, default) == _terms_walked(doc)


def test_excluded_paths_make_writes_cheaper():
    w = World()
    wide = {"id": "a", "pk": "p", **{f"f{i}": i for i in range(40)}}
    charges = []
    for name, policy in (("all", None), ("pk", ONLY_PK), ("none", NONE)):
        body = {"id": name, "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}}
        if policy is not None:
            body["indexingPolicy"] = policy
        c = w.account.create_container(w.account.create_database({"id": name}), body)
        writer = w.writer(c, "p")
        writer.create(dict(wide))
        charges.append(charge.staged(writer))
    assert charges[0] > charges[1] > charges[2]
    assert charges[0] - charges[1] == pytest.approx(charge.INDEX_RU_PER_TERM * 40)


def _store_state(rs):
    return rs.lsn, rs.store.count_live, [(k, [v.lsn for v in vs]) for k, vs in rs.store.keys_with_versions()]


def test_staged_charges_of_every_write_kind_are_known_before_commit():
    w = World()
    c = w.container()
    doc = {"id": "a", "pk": "p", "payload": "x" * 3000}

    def staged(op, *args):
        writer = w.writer(c, "p")
        before = _store_state(writer.rs)
        getattr(writer, op)(*args)
        ru = charge.staged(writer)
        assert _store_state(writer.rs) == before          # charging applies nothing
        writer.commit()
        return ru

    terms = charge.index_terms(doc, c.definition["indexingPolicy"])
    assert terms == 4
    create = staged("create", dict(doc))
    stored = len(w.account.databases["db"].containers["c"].partitions[0].replica_sets["East US"]
                 .store.latest(('["p"]', "a")).body)
    assert create == charge.write(stored, terms)
    assert staged("upsert", dict(doc)) == charge.replace(stored, terms)
    assert staged("replace", "a", dict(doc)) == charge.replace(stored, terms)
    patched = staged("patch", "a", [{"op": "set", "path": "/n", "value": 1}], None)
    assert patched == charge.replace(stored + len(',"n":1'), terms + 1)
    assert staged("delete", "a") == charge.delete(stored + len(',"n":1'), terms + 1)
    assert staged("upsert", dict(doc, id="b")) == charge.write(stored, terms)


def test_delete_by_partition_key_is_the_sum_of_its_deletes():
    w = World()
    c = w.container()
    for i in range(5):
        w.write(c, "p", "create", {"id": str(i), "pk": "p", "v": i})
    writer = w.writer(c, "p")
    assert writer.delete_all() == 5
    assert charge.staged_count(writer) == 5
    each = [charge.delete(len(v.body), 4) for v in writer.rs.store.scan(writer.rs.lsn, prefix='["p"]')]
    assert charge.staged(writer) == pytest.approx(sum(each))


def test_feeds_and_queries():
    assert charge.feed(0, 0) == charge.FEED_RU_BASE
    assert charge.feed(10, 10 * KB) > charge.feed(1, KB)
    assert charge.query(100, 1, KB) > charge.query(1, 1, KB) >= charge.QUERY_RU_BASE
