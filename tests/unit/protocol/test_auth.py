"""Master-key auth agrees with the official SDK: requests signed by the SDK's own code (its signing
function fed by its own link helpers, and real SDK calls captured by an in-memory transport) are
accepted by our verifier, and a wrong key or a tampered path is rejected; a request dated more
than the allowed skew from the server's clock (passed in) is rejected, whichever side it is on."""

import json
import urllib.parse

import pytest
from azure.core.pipeline.transport import HttpResponse, HttpTransport
from azure.cosmos import CosmosClient, PartitionKey
from azure.cosmos import _base as sdk_base
from azure.cosmos import auth as sdk_auth
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from regionlab.client.protocol import auth
from regionlab.emulator.core import rid
from tiers import examples

KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
OTHER_KEY = "dGhpcyBpcyBub3QgdGhlIGFjY291bnQga2V5LCBpdCBpcyBhIGRpZmZlcmVudCBvbmU="
DATE = "Tue, 01 Jul 2025 12:00:00 GMT"

DB_RID = rid.database_rid(5)
COLL_RID = rid.collection_rid(DB_RID, 3)
DOC_RID = rid.document_rid(COLL_RID, 77)
OFFER_RID = rid.offer_rid(9)


class _Conn:
    """What the SDK's signing function reads from a client connection."""
    master_key = KEY
    resource_tokens = None


def sdk_signed(verb: str, path: str, resource_id: str | None, resource_type: str) -> str:
    """The authorization header the SDK puts on a request, computed by the SDK's own code the way
    ``_base.GetHeaders`` does it."""
    rtype = sdk_base._internal_resourcetype(resource_type)
    token = sdk_auth._get_authorization_header(
        _Conn, verb, path, resource_id, sdk_base.IsNameBased(resource_id), rtype, {"x-ms-date": DATE}
    )
    return urllib.parse.quote(token, "-_.!~*'()")


def item_request(verb: str, link: str, resource_type: str):
    """(path, header) for an operation on one resource, as _cosmos_client_connection builds it."""
    path = sdk_base.GetPathFromLink(link)
    return path, sdk_signed(verb, path, sdk_base.GetResourceIdOrFullNameFromLink(link), resource_type)


def feed_request(verb: str, parent_link: str, resource_type: str):
    """(path, header) for a create/query/read-feed under ``parent_link``."""
    path = sdk_base.GetPathFromLink(parent_link, resource_type)
    return path, sdk_signed(verb, path, sdk_base.GetResourceIdOrFullNameFromLink(parent_link), resource_type)


NAME_LINKS = [
    ("dbs/db1", "dbs"),
    ("dbs/db1/colls/c1", "colls"),
    ("dbs/db1/colls/c1/docs/item-1", "docs"),
    ("dbs/my db/colls/my coll/docs/an item", "docs"),
    ("dbs/Ünïcødé/colls/日本語/docs/émoji 😀", "docs"),
    ("dbs/db1/colls/c1/docs/100%25 real", "docs"),
    ("dbs/db1/colls/c1/docs/a+b=c&d;e", "docs"),
    ("dbs/MixedCase/colls/CoLL/docs/ID", "docs"),
    ("dbs/db1/colls/c1/sprocs/sp1", "sprocs"),
    ("dbs/db1/users/u1", "users"),
    ("dbs/12345678/colls/c", "colls"),          # 8 chars, but not base64 of 4 bytes
]
RID_LINKS = [
    (f"dbs/{DB_RID}", "dbs"),
    (f"dbs/{DB_RID}/colls/{COLL_RID}", "colls"),
    (f"dbs/{DB_RID}/colls/{COLL_RID}/docs/{DOC_RID}", "docs"),
    ("dbs/gAAFAA==/colls/gAAFAIAAAAE=/docs/gAAFAIAAAAEBAAAAAAAAAA==", "docs"),
    (f"offers/{OFFER_RID}", "offers"),
]


@pytest.mark.parametrize("verb", ["get", "put", "delete", "patch"])
@pytest.mark.parametrize("link,rtype", NAME_LINKS + RID_LINKS)
def test_point_requests_signed_by_sdk_verify(verb, link, rtype):
    path, header = item_request(verb, link, rtype)
    assert auth.resource_type_and_link(path)[0] == rtype
    auth.MasterKeyVerifier(KEY).verify(verb.upper(), path, header, DATE)


@pytest.mark.parametrize("verb", ["get", "post"])
@pytest.mark.parametrize("parent,rtype", [
    ("dbs/db1", "colls"), ("dbs/db1/colls/c1", "docs"), ("dbs/db1/colls/c1", "pkranges"),
    ("dbs/a b/colls/ç d", "docs"), (f"dbs/{DB_RID}/colls/{COLL_RID}", "docs"),
    (f"dbs/{DB_RID}", "colls"), (f"dbs/{DB_RID}/colls/{COLL_RID}", "pkranges"),
])
def test_feed_requests_signed_by_sdk_verify(verb, parent, rtype):
    path, header = feed_request(verb, parent, rtype)
    assert auth.resource_type_and_link(path)[0] == rtype
    auth.MasterKeyVerifier(KEY).verify(verb, path, header, DATE)


@pytest.mark.parametrize("path,rtype", [("/dbs", "dbs"), ("/offers", "offers")])
def test_top_level_feeds(path, rtype):
    # CreateDatabase / QueryOffers pass no resource id at all.
    header = sdk_signed("post", path, None, rtype)
    assert auth.resource_type_and_link(path) == (rtype, "")
    auth.MasterKeyVerifier(KEY).verify("POST", path, header, DATE)


def test_account_read():
    header = sdk_signed("get", "", "", "")
    assert auth.resource_type_and_link("/") == ("", "")
    auth.MasterKeyVerifier(KEY).verify("GET", "/", header, DATE)


@pytest.mark.parametrize("coll_link", ["dbs/db1/colls/c1", "dbs/a b/colls/ü", f"dbs/{DB_RID}/colls/{COLL_RID}"])
def test_partition_key_delete(coll_link):
    # DeleteAllItemsByPartitionKey: the path gains operations/partitionkeydelete, signed as the container.
    path = sdk_base.GetPathFromLink(coll_link) + "operations/partitionkeydelete"
    header = sdk_signed("post", path, sdk_base.GetResourceIdOrFullNameFromLink(coll_link), "partitionkey")
    assert auth.resource_type_and_link(path)[0] == "colls"
    auth.MasterKeyVerifier(KEY).verify("POST", path, header, DATE)


def test_derivation_table():
    assert auth.resource_type_and_link("/dbs/x/colls/y/docs/") == ("docs", "dbs/x/colls/y")
    assert auth.resource_type_and_link("/dbs/x/colls/y/docs/z/") == ("docs", "dbs/x/colls/y/docs/z")
    assert auth.resource_type_and_link("/dbs/a%20b/") == ("dbs", "dbs/a b")
    assert auth.resource_type_and_link("/dbs/x/colls/y/operations/partitionkeydelete") == ("colls", "dbs/x/colls/y")
    assert auth.resource_type_and_link(f"/offers/{OFFER_RID}") == ("offers", OFFER_RID.lower())
    assert auth.resource_type_and_link(f"/dbs/{DB_RID}/colls/{COLL_RID}/docs/") == ("docs", COLL_RID.lower())
    assert auth.resource_type_and_link("/dbs/x/colls/y/docs/?a=b") == ("docs", "dbs/x/colls/y")
    # An id holding a literal "%41" travels as %2541 and must be signed as "%41", not "A".
    assert auth.resource_type_and_link("/dbs/x/colls/y/docs/%2541/") == ("docs", "dbs/x/colls/y/docs/%41")


_ID_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="/\\?#")
_IDS = st.text(_ID_CHARS, min_size=1, max_size=12)


@settings(max_examples=examples(150), deadline=None)
@given(db=_IDS, coll=_IDS, doc=_IDS, verb=st.sampled_from(["get", "put", "delete", "patch", "post"]))
def test_any_name_based_link_agrees_with_sdk(db, coll, doc, verb):
    link = f"dbs/{db}/colls/{coll}/docs/{doc}"
    try:
        sdk_name_based = sdk_base.IsNameBased(link)
    except ValueError:      # the SDK itself crashes on 8-char non-ASCII database names
        assume(False)
    assert auth.is_name_based(link) == sdk_name_based
    for path, header, rtype in [(*item_request(verb, link, "docs"), "docs"),
                                (*feed_request(verb, f"dbs/{db}/colls/{coll}", "docs"), "docs")]:
        assert auth.resource_type_and_link(path)[0] == rtype
        auth.MasterKeyVerifier(KEY).verify(verb, path, header, DATE)


@settings(max_examples=examples(100), deadline=None)
@given(db=st.integers(1, 2**32 - 1), coll=st.integers(1, 2**31 - 1), doc=st.integers(1, 2**60 - 1))
def test_any_rid_link_agrees_with_sdk(db, coll, doc):
    db_rid = rid.database_rid(db)
    coll_rid = rid.collection_rid(db_rid, coll)
    link = f"dbs/{db_rid}/colls/{coll_rid}/docs/{rid.document_rid(coll_rid, doc)}"
    assert not sdk_base.IsNameBased(link) and not auth.is_name_based(link)
    path, header = item_request("get", link, "docs")
    auth.MasterKeyVerifier(KEY).verify("get", path, header, DATE)


def test_wrong_key_is_rejected_with_the_signed_text():
    path, header = item_request("get", "dbs/db1/colls/c1/docs/x", "docs")
    with pytest.raises(auth.AuthError) as e:
        auth.MasterKeyVerifier(OTHER_KEY).verify("GET", path, header, DATE)
    assert e.value.status == 401
    assert "'get\\ndocs\\ndbs/db1/colls/c1/docs/x\\ntue, 01 jul 2025 12:00:00 gmt\\n\\n'" in e.value.message


@pytest.mark.parametrize("verb,path,date", [
    ("GET", "/dbs/db1/colls/c1/docs/y/", DATE),       # another item
    ("GET", "/dbs/db1/colls/c1/docs/X/", DATE),       # names are case sensitive
    ("DELETE", "/dbs/db1/colls/c1/docs/x/", DATE),    # another verb
    ("GET", "/dbs/db1/colls/c1/docs/", DATE),         # the feed instead of the item
    ("GET", "/dbs/db1/colls/c1/docs/x/", "Tue, 01 Jul 2025 12:00:01 GMT"),
])
def test_tampered_request_is_rejected(verb, path, date):
    _, header = item_request("get", "dbs/db1/colls/c1/docs/x", "docs")
    with pytest.raises(auth.AuthError, match="does not match"):
        auth.MasterKeyVerifier(KEY).verify(verb, path, header, date)


@pytest.mark.parametrize("header,date,needle", [
    (None, DATE, "no 'authorization' header"),
    ("", DATE, "no 'authorization' header"),
    ("type%3Dmaster%26ver%3D1.0%26sig%3Dabc", None, "no 'x-ms-date'"),
    ("garbage", DATE, "malformed"),
    ("type%3Dmaster%26ver%3D1.0", DATE, "'sig' field is missing"),
    ("type%3Dresource%26ver%3D1.0%26sig%3Dabc", DATE, "type=resource"),
    ("type%3Daad%26ver%3D1.0%26sig%3Dabc", DATE, "three dot-separated parts"),   # not an emulator JWT
    ("type%3Dmaster%26ver%3D2.0%26sig%3Dabc", DATE, "ver=2.0"),
])
def test_malformed_requests_say_what_is_wrong(header, date, needle):
    with pytest.raises(auth.AuthError) as e:
        auth.MasterKeyVerifier(KEY).verify("GET", "/dbs/db1/", header, date)
    assert needle in e.value.message


def test_the_sdks_none_for_a_missing_resource_token_is_explained():
    with pytest.raises(auth.AuthError) as e:
        auth.MasterKeyVerifier(KEY).verify("GET", "/dbs/db1/colls/c", "None", DATE)
    assert "no resource token" in e.value.message and "container_link" in e.value.message


def test_our_signer_matches_the_sdk():
    path, header = item_request("put", "dbs/d/colls/c/docs/ü x", "docs")
    rtype, link = auth.resource_type_and_link(path)
    assert auth.authorization_header(KEY, "PUT", rtype, link, DATE) == header
    assert urllib.parse.unquote(header) == auth.sign(KEY, "put", rtype, link, DATE)
    assert auth.sign(KEY, "put", rtype, link, DATE).startswith("type=master&ver=1.0&sig=")


def test_verified_cache_is_bounded_and_skips_the_hmac(monkeypatch):
    verifier = auth.MasterKeyVerifier(KEY, cache_entries_max=3)
    requests = [item_request("get", f"dbs/d/colls/c/docs/{i}", "docs") for i in range(5)]
    for path, header in requests:
        verifier.verify("get", path, header, DATE)
    assert len(verifier._verified) == 3
    calls = []
    monkeypatch.setattr(auth, "_signature", lambda *a: calls.append(a) or "x")
    verifier.verify("get", *requests[-1], DATE)          # cached: no HMAC
    assert calls == []
    with pytest.raises(auth.AuthError):
        verifier.verify("get", *requests[0], DATE)       # evicted: recomputed (and now wrong)
    assert len(calls) == 1


# --- Real SDK calls, captured by an in-memory transport ----------------------------------------

BASE_URL = "http://127.0.0.1:9/"


class _Response(HttpResponse):
    def __init__(self, request, status: int, body: object, headers: dict | None = None):
        super().__init__(request, None)
        self.status_code = status
        self.reason = "OK"
        self.headers = {"content-type": "application/json", **(headers or {})}
        self._body = b"" if body is None else json.dumps(body).encode()

    def body(self) -> bytes:
        return self._body


class _RecordingTransport(HttpTransport):
    """Answers every request with a plausible body and records (method, raw path, headers)."""

    def __init__(self):
        self.requests: list[tuple[str, str, dict]] = []

    def __enter__(self):
        return self

    def __exit__(self, *args):
        pass

    def open(self):
        pass

    def close(self):
        pass

    def send(self, request, **kwargs):
        path = urllib.parse.urlsplit(request.url).path
        self.requests.append((request.method, path, dict(request.headers)))
        return _Response(request, *self._answer(request, path))

    def _answer(self, request, path):
        segments = [s for s in path.split("/") if s]
        if not segments:
            loc = [{"name": "West US", "databaseAccountEndpoint": BASE_URL}]
            return 200, {"id": "t", "writableLocations": loc, "readableLocations": loc,
                         "userConsistencyPolicy": {"defaultConsistencyLevel": "Eventual"}}
        if request.method == "DELETE":
            return 204, None
        if segments[-1] == "pkranges":
            if request.headers.get("If-None-Match"):
                return 304, None, {"etag": '"1"'}
            ranges = [{"id": "0", "minInclusive": "", "maxExclusive": "FF"}]
            return 200, {"PartitionKeyRanges": ranges}, {"etag": '"1"'}
        if request.headers.get("x-ms-cosmos-is-batch-request"):
            return 200, [{"statusCode": 200} for _ in json.loads(request.body)]
        offer = {"id": OFFER_RID, "_rid": OFFER_RID, "_self": f"offers/{OFFER_RID}/",
                 "resource": "x", "offerResourceId": "x", "content": {"offerThroughput": 400}}
        if len(segments) % 2 == 1 and request.method in ("GET", "POST") and (
                request.method == "GET" or request.headers.get("x-ms-documentdb-isquery")):
            return 200, {"_rid": "", "Documents": [], "DocumentCollections": [], "Databases": [],
                         "Offers": [offer], "_count": 0}
        body = json.loads(request.body) if request.body else {}
        if not isinstance(body, dict) or "operations" in body:
            body = {}
        body.setdefault("id", urllib.parse.unquote(segments[-1]))
        body.update({"_rid": COLL_RID, "_self": f"dbs/{DB_RID}/colls/{COLL_RID}/",
                     "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}})
        return 200, body


def _drive_sdk(transport):
    client = CosmosClient(BASE_URL, KEY, transport=transport, enable_endpoint_discovery=False)
    client.create_database("db 1", offer_throughput=400)
    list(client.list_databases())
    list(client.query_databases("SELECT * FROM d"))
    db = client.get_database_client("db 1")
    db.read()
    db.create_container("cø/ll".replace("/", " "), PartitionKey("/pk"))
    list(db.list_containers())
    container = db.get_container_client("cø ll")
    container.read()
    container.create_item({"id": "it em%", "pk": "p"})
    container.upsert_item({"id": "ü", "pk": "p"})
    container.read_item("it em%", partition_key="p")
    container.replace_item("it em%", {"id": "it em%", "pk": "p", "n": 1})
    container.patch_item("it em%", "p", [{"op": "set", "path": "/n", "value": 2}])
    list(container.query_items("SELECT * FROM c", partition_key="p"))
    list(container.read_all_items())
    container.execute_item_batch([("create", ({"id": "b", "pk": "p"},))], partition_key="p")
    container.delete_all_items_by_partition_key("p")
    container.delete_item("it em%", partition_key="p")
    rid_item = {"id": "r", "_self": f"dbs/{DB_RID}/colls/{COLL_RID}/docs/{DOC_RID}/"}
    container.read_item(rid_item, partition_key="p")
    container.replace_item(rid_item, {"id": "r", "pk": "p"})
    container.get_throughput()
    container.replace_throughput(500)
    db.delete_container("cø ll")
    client.delete_database("db 1")


def test_real_sdk_traffic_verifies():
    transport = _RecordingTransport()
    _drive_sdk(transport)
    seen = {(m, auth.resource_type_and_link(p)[0]) for m, p, _ in transport.requests}
    assert {("POST", "dbs"), ("PUT", "docs"), ("PATCH", "docs"), ("PUT", "offers"),
            ("POST", "offers"), ("POST", "colls"), ("DELETE", "dbs")} <= seen
    assert any(p.endswith("partitionkeydelete") for _, p, _ in transport.requests)
    assert any(DOC_RID in p for _, p, _ in transport.requests)
    verifier = auth.MasterKeyVerifier(KEY)
    stranger = auth.MasterKeyVerifier(OTHER_KEY)
    for method, path, headers in transport.requests:
        verifier.verify(method, path, headers["authorization"], headers["x-ms-date"])
        with pytest.raises(auth.AuthError):
            stranger.verify(method, path, headers["authorization"], headers["x-ms-date"])


def test_the_signer_signs_as_authorization_header():
    signer = auth.MasterKeySigner(KEY)
    for verb, rtype, link in (("GET", "", ""), ("PUT", "docs", "dbs/db/colls/c/docs/x"), ("POST", "offers", "")):
        assert signer.header(verb, rtype, link, DATE) == auth.authorization_header(KEY, verb, rtype, link, DATE)


# ---- the date window ---------------------------------------------------------------------------
NOW_S = 1_751_371_200.0                    # Tue, 01 Jul 2025 12:00:00 GMT


def test_date_epoch_s_reads_rfc_1123():
    assert auth.date_epoch_s("Tue, 01 Jul 2025 12:00:00 GMT") == NOW_S
    assert auth.date_epoch_s("tue, 01 jul 2025 12:00:00 gmt") == NOW_S
    for bad in ("yesterday", "Tue, 99 Foo 2025 99:99:99 GMT", "", "Tue, 01 Jul 99999999999 12:00:00 GMT"):
        with pytest.raises(auth.AuthError, match="RFC 1123"):
            auth.date_epoch_s(bad)


@pytest.mark.parametrize("skew_s, accepted", [(0, True), (-900, True), (900, True), (-901, False),
                                              (901, False), (-86400 * 365, False)])
def test_check_clock_skew_allows_15_minutes_either_way(skew_s, accepted):
    date = "a date"
    if accepted:
        auth.check_clock_skew(date, NOW_S + skew_s, NOW_S, auth.CLOCK_SKEW_MAX_S)
    else:
        with pytest.raises(auth.AuthError) as e:
            auth.check_clock_skew(date, NOW_S + skew_s, NOW_S, auth.CLOCK_SKEW_MAX_S)
        assert f"{abs(skew_s)} s {'ahead of' if skew_s > 0 else 'behind'}" in e.value.message
        assert "Tue, 01 Jul 2025 12:00:00 GMT" in e.value.message and "900 s" in e.value.message


def test_check_clock_skew_0_is_off():
    auth.check_clock_skew("a date", NOW_S - 86400 * 3650, NOW_S, 0)


# ---- the emulator's AAD emulation ---------------------------------------------------------------

def _aad(token: str) -> str:
    return f"type=aad&ver=1.0&sig={token}"


def test_the_emulator_aad_token_is_accepted_and_its_window_returned():
    verifier = auth.MasterKeyVerifier(KEY)
    token = auth.emulator_aad_token(KEY, 1_000_000, lifetime_s=7200)
    assert verifier.verify("GET", "/dbs/db", _aad(token), DATE) == (1_000_000, 1_007_200)
    # One token signs many requests: the second is answered from the cache, window and all.
    assert verifier.verify("POST", "/dbs", _aad(token), DATE) == (1_000_000, 1_007_200)


@pytest.mark.parametrize("token, reason", [
    (auth.emulator_aad_token(OTHER_KEY, 0), "signature is not the account key"),
    ("a.b", "three dot-separated parts"),
    ("!!.!!.!!", "base64url-encoded JSON"),
    ("x" * (auth.AAD_TOKEN_MAX_CHARS + 1), "more than"),
])
def test_other_jwts_are_refused(token, reason):
    with pytest.raises(auth.AuthError, match=reason):
        auth.MasterKeyVerifier(KEY).verify("GET", "/dbs/db", _aad(token), DATE)


def test_a_jwt_with_another_kid_is_refused():
    _, claims, signature = auth.emulator_aad_token(KEY, 0).split(".")
    header = auth._b64url(json.dumps({"alg": "RS256", "kid": "tenant-key"}).encode())
    with pytest.raises(auth.AuthError, match="kid"):
        auth.MasterKeyVerifier(KEY).verify("GET", "/dbs/db", _aad(f"{header}.{claims}.{signature}"), DATE)


def test_the_token_window_is_judged_with_the_skew_allowance():
    auth.check_token_window((100.0, 200.0), 200.0 + 60, max_skew_s=60)
    auth.check_token_window((100.0, 200.0), 100.0 - 60, max_skew_s=60)
    auth.check_token_window((100.0, 200.0), 10_000.0, max_skew_s=0)       # off, as the date check
    with pytest.raises(auth.AuthError, match="expired"):
        auth.check_token_window((100.0, 200.0), 261.0, max_skew_s=60)
    with pytest.raises(auth.AuthError, match="not valid before"):
        auth.check_token_window((100.0, 200.0), 39.0, max_skew_s=60)


def test_resource_token_signer_picks_the_token_covering_the_link():
    """ResourceTokenSigner: the token of the longest link prefix, percent-encoded as the SDK sends
    it; the account read gets one; a link no token covers gets none (the service answers 401)."""
    coll = "type=resource&ver=1&sig=c/+=;e30=;"
    item = "type=resource&ver=1&sig=i/+=;e30=;"
    signer = auth.ResourceTokenSigner({"dbs/d/colls/c": coll, "/dbs/d/colls/c2/docs/x/": item})
    quoted = lambda t: urllib.parse.quote(t, safe="-_.!~*'()")
    assert signer.header("get", "docs", "dbs/d/colls/c/docs/a", DATE) == quoted(coll)
    assert signer.header("post", "docs", "dbs/d/colls/c", DATE) == quoted(coll)
    assert signer.header("get", "docs", "dbs/d/colls/c2/docs/x", DATE) == quoted(item)
    assert signer.header("get", "docs", "dbs/d/colls/c2/docs/y", DATE) == ""
    assert signer.header("get", "colls", "dbs/d/colls/cc", DATE) == ""
    assert signer.header("get", "", "", DATE) in (quoted(coll), quoted(item))
    assert auth.is_resource_token(quoted(coll)) and auth.is_resource_token(coll)
    assert not auth.is_resource_token(auth.authorization_header(KEY, "get", "docs", "dbs/d", DATE))
    with pytest.raises(TypeError):
        auth.ResourceTokenSigner({})
