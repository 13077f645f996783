"""Resource tokens: minted on each read or write of a permission, checked on each request signed
with one (docs/permissions.md).

Theory of operation. A token has the service's shape, `type=resource&ver=1&sig=<sig>;<claims>;`,
which the SDKs pass on verbatim as the authorization header (percent-encoded). `<claims>` is the
base64 of JSON [permission rid, issued s, expires s, mode, container rid, item id, partition
key]; `<sig>` is HMAC-SHA256 over it, keyed by a key derived from the account key, so no one
without the account key can make or alter a token, and a token is not a master-key signature of
anything. Its times are on the account clock of the region that issued it (a clock_skew fault
moves them, so tests expire tokens without waiting).

A request signed with a token is allowed when the signature holds, the token has not expired
(by the serving region's clock), its permission still exists with the grant the token names (a
deleted or re-pointed permission, user or database invalidates its tokens: 401), and the request
lies inside that grant (403 otherwise: `authorize`). Tokens are bearer tokens, as in the
service: the request's date is not checked against them. Verified claims are kept by the
header's text in a Cache bounded in bytes; expiry and the permission are checked every time.
"""
import base64
import binascii
import email.utils
import hmac
import json
import urllib.parse
from dataclasses import dataclass

from regionlab.client.protocol import headers as H
from regionlab.client.protocol.auth import AuthError

from ..core.cache import Cache, text_bytes
from ..core.errors import CosmosError
from ..core.limits import RESOURCE_TOKENS_CACHE_MAX_BYTES
from ..core.users import READ, Grant
from . import partition_keys
from .metadata import is_query
from .paths import rid_based

TOKEN_PREFIX = "type=resource&ver=1&sig="
_KEY_LABEL = b"regionlab resource tokens v1"
_INSUFFICIENT = ("Insufficient permissions provided in the authorization header for the corresponding "
                 "request: ")


@dataclass(frozen=True, slots=True)
class Claims:
    permission_rid: str
    issued_s: int
    expires_s: int
    grant: Grant


class ResourceTokens:
    """Mints and verifies the tokens of one account key (None: the endpoint checks no auth, and
    tokens are minted with an empty key)."""

    def __init__(self, key_b64: str | None):
        account_key = base64.b64decode(key_b64) if key_b64 else b""
        self._key = hmac.digest(account_key, _KEY_LABEL, "sha256")
        self._verified = Cache(RESOURCE_TOKENS_CACHE_MAX_BYTES)

    def mint(self, permission, issued_s: int, lifetime_s: int) -> str:
        claims = json.dumps([permission.rid, issued_s, issued_s + lifetime_s, *permission.grant.as_list()],
                            separators=(",", ":"), ensure_ascii=True).encode("ascii")
        return f"{TOKEN_PREFIX}{self._sign(claims)};{base64.b64encode(claims).decode('ascii')};"

    def _sign(self, claims: bytes) -> str:
        return base64.b64encode(hmac.digest(self._key, claims, "sha256")).decode("ascii")

    def claims(self, authorization: str) -> Claims:
        """The claims of a token as the authorization header carries it; AuthError (401) if it is
        not a token this account issued."""
        hit = self._verified.get(authorization)
        if hit is not None:
            return hit
        text = urllib.parse.unquote(authorization)
        if not text.startswith(TOKEN_PREFIX):
            raise AuthError(f"The resource token is malformed: it must start with '{TOKEN_PREFIX}'. Use the "
                            "permission's _token exactly as the service returned it.")
        parts = text[len(TOKEN_PREFIX):].split(";")
        if len(parts) != 3 or parts[2]:
            raise AuthError("The resource token is malformed: expected '<signature>;<claims>;' after 'sig='. "
                            "Use the permission's _token exactly as the service returned it.")
        try:
            raw = base64.b64decode(parts[1], validate=True)
        except (binascii.Error, ValueError):
            raw = None
        if raw is None or not hmac.compare_digest(parts[0].encode("ascii", "replace"), self._sign(raw).encode()):
            raise AuthError("The resource token's signature does not match: it was not issued by this "
                            "account (or was altered). Read the permission again for a new token.")
        rid, issued_s, expires_s, *grant = json.loads(raw)       # ours: the signature held
        claims = Claims(rid, issued_s, expires_s, Grant(*grant))
        return self._verified.put(authorization, claims, text_bytes(authorization) + 2 * len(raw))


def check(call, claims: Claims, now_s: float) -> None:
    """401 unless the token is current and its permission still grants what it names; 403 unless
    the request lies inside that grant."""
    if now_s >= claims.expires_s:
        raise AuthError(
            "The authorization token is not valid at the current time: this resource token expired. Read "
            "the permission again for a new token (token issued: "
            f"{_http_date(claims.issued_s)}, token expiry: {_http_date(claims.expires_s)}, current "
            f"server time: {_http_date(now_s)}).")
    permission = call.svc.account.users.permissions_by_rid.get(claims.permission_rid)
    if permission is None:
        raise AuthError("The resource token is no longer valid: its permission (or its user, or their "
                        "database) was deleted.")
    if permission.grant != claims.grant:
        raise AuthError(f"The resource token is no longer valid: permission '{permission.id}' was replaced "
                        "since the token was issued. Read the permission again for a new token.")
    authorize(call, claims.grant)


def authorize(call, grant: Grant) -> None:
    """Whether a request lies inside grant: a 403 saying why not. GET / (account discovery) and
    reads of the granted container and its partition key ranges are allowed to any token, as
    the SDKs need them to use it."""
    segs = call.segs
    n = len(segs)
    if n == 0:
        return
    if n < 4 or segs[0] != "dbs" or segs[2] != "colls":
        raise _forbidden("a resource token grants access to one container or item; this request is "
                         "outside any container (use the master key for it)")
    c = _container(call.svc.account, segs)
    if c is None or c.rid != grant.coll_rid:
        raise _forbidden("the token does not grant access to this container")
    reading = call.method in ("GET", "HEAD")
    if n == 4 or (n == 5 and segs[4] == "pkranges"):
        if reading:
            return
        raise _forbidden("a resource token cannot change a container")
    if segs[4] not in ("docs", "operations") or n > 6:
        raise _forbidden(f"the token grants access to items, not to '{segs[4]}'")
    reading = reading or (call.method == "POST" and segs[4] == "docs" and n == 5
                          and (is_query(call) or call.header(H.IS_QUERY_PLAN) is not None))
    if grant.mode == READ and not reading:
        raise _forbidden("the token grants Read only, and this request writes")
    if grant.item_id is not None:
        if n != 6 or segs[4] != "docs" or _item_id(c, segs[5], rid_based(segs[1])) != grant.item_id:
            raise _forbidden(f"the token grants access to the item '{grant.item_id}' only")
    if grant.pk_json is not None:
        raw = call.header(H.PARTITION_KEY)
        if raw is None or partition_keys.parse(raw)[0] != grant.pk_json:
            raise _forbidden(f"the token grants access to the partition key {grant.pk_json} only; send that "
                             "partition key with the request (x-ms-documentdb-partitionkey)")


def _container(account, segs: list):
    by_rid = rid_based(segs[1])
    db = account.dbs_by_rid.get(segs[1]) if by_rid else account.databases.get(segs[1])
    if db is None:
        return None
    c = account.colls_by_rid.get(segs[3]) if by_rid else db.containers.get(segs[3])
    return c if c is not None and c.db is db else None


def _item_id(container, segment: str, by_rid: bool) -> str | None:
    if not by_rid:
        return segment
    version = container.rid_index.get(segment)
    return None if version is None else version.key[1]


def _forbidden(why: str) -> CosmosError:
    return CosmosError(403, 0, _INSUFFICIENT + why + ".")


def _http_date(epoch_s: float) -> str:
    return email.utils.formatdate(epoch_s, usegmt=True)
