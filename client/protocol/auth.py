"""Master-key authorization: what the client signs and what the server checks (cosmos-wire §3).

Theory of operation. A request is signed with HMAC-SHA256 over five lower-cased lines,

    verb \\n resourceType \\n resourceLink \\n x-ms-date \\n date \\n

keyed by the base64-decoded account key. The header value is
``type=master&ver=1.0&sig=<base64>``, percent-encoded as a whole on the wire. The client knows
(resourceType, resourceLink) from the operation it performs; the server has to work them out
from the request path alone, and ``resource_type_and_link`` is that derivation:

* the path is split on ``/`` and each segment percent-decoded (the SDK signs raw ids);
* an odd number of segments is a feed: its type is the last segment, its link the rest;
* an even number is one resource: its type is the second-to-last segment, its link the path;
* ``…/colls/{c}/operations/partitionkeydelete`` is signed as the container (``colls``);
* a name-based link (``dbs/<name>/…``) is signed in full with its case kept; anything else
  (rid paths, ``offers/<rid>``) is signed as its last rid only, lower-cased.

The emulator's AAD emulation is accepted too, as the official emulator accepts it: the header
``type=aad&ver=1.0&sig=<JWT>`` carries a token whose header names the key id
``CosmosEmulatorPrimaryMaster`` and whose signature part is the base64url text of the account
key itself (the token the SDKs' own emulator tests mint; ``emulator_aad_token`` builds one). Any
other JWT is refused 401: there is no identity provider to check it against. The token's
``nbf``/``exp`` window is returned to the caller, which judges it with its clock.

Both the emulator and our client import this module; it does no I/O and keeps no state except
the verifier's bounded cache of signatures it has already accepted. Time comes in as a
parameter (``check_clock_skew(…, now_s, …)``): the caller owns the clock.
"""

import base64
import binascii
import datetime
import email.utils
import hmac
import json
import urllib.parse

MASTER_TOKEN_TYPE = "master"
AAD_TOKEN_TYPE = "aad"
# The key id the official emulator's AAD emulation signs with (its JWT header's `kid`).
EMULATOR_AAD_KID = "CosmosEmulatorPrimaryMaster"
# A JWT larger than this is refused before it is decoded (real AAD tokens are 1-4 KB).
AAD_TOKEN_MAX_CHARS = 16 * 1024
TOKEN_VERSION = "1.0"
VERIFIED_CACHE_MAX_ENTRIES = 4096
# The service refuses a request whose date is further than this from its own clock, so a
# captured request cannot be replayed later (cosmos-wire §3).
CLOCK_SKEW_MAX_S = 15 * 60

# Characters the SDK leaves unescaped when it percent-encodes the header value.
_HEADER_SAFE_CHARS = "-_.!~*'()"
_RID_DB_LENGTH = 8
_RID_DB_BYTES = 4


class AuthError(Exception):
    """The request is not authorized: answer 401 with this message."""

    status = 401
    substatus = 0

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def date_epoch_s(date: str) -> float:
    """The instant an RFC 1123 ``x-ms-date`` names, in epoch seconds; AuthError if it is not one."""
    try:
        parsed = email.utils.parsedate_to_datetime(date)
        if parsed.tzinfo is None:           # "-0000": RFC 5322's "UTC, origin unknown"
            parsed = parsed.replace(tzinfo=datetime.timezone.utc)
        return parsed.timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        raise AuthError(f"The x-ms-date header '{date[:60]}' is not a valid RFC 1123 date, "
                        "e.g. 'Tue, 01 Jul 2025 12:00:00 GMT'.") from None


def check_clock_skew(date: str, date_s: float, now_s: float, max_skew_s: float) -> None:
    """AuthError unless the request's date ``date_s`` is within ``max_skew_s`` of the server's
    clock ``now_s`` (both epoch seconds); ``max_skew_s`` 0 turns the check off."""
    if not max_skew_s:
        return
    skew_s = date_s - now_s
    if abs(skew_s) <= max_skew_s:
        return
    now_text = email.utils.formatdate(now_s, usegmt=True)
    direction = "ahead of" if skew_s > 0 else "behind"
    raise AuthError(
        f"The authorization token is not valid at the current time: the request's x-ms-date "
        f"'{date[:60]}' is {abs(skew_s):.0f} s {direction} the server's "
        f"clock ({now_text}); a signed request is accepted only within {max_skew_s:g} s of the "
        "server's time, so that a captured request cannot be replayed. Sign each request with "
        "the current time and check this machine's clock (or start regionlab with "
        "--max-clock-skew-s 0 on a host whose clock cannot be fixed)."
    )


def is_name_based(link: str) -> bool:
    """True when ``link`` addresses a resource by names (``dbs/<name>/…``), as the SDK decides it.

    The database segment decides: an 8-character string that base64-decodes (``-`` read as
    ``/``) to exactly 4 bytes is a database rid, so the link is rid-based. The SDK uses the
    lenient stdlib decoder, and so do we, so both agree on odd names. The one divergence: the SDK
    crashes on an 8-character non-ASCII database name, which we call name-based.
    """
    if not link:
        return False
    if link.startswith("/") and len(link) > 1:
        link = link[1:]
    parts = link.split("/")
    if parts[0].lower() != "dbs" or len(parts) < 2 or not parts[1]:
        return False
    db_segment = parts[1]
    if len(db_segment) != _RID_DB_LENGTH:
        return True
    return not _decodes_to_db_rid(db_segment)


def _decodes_to_db_rid(segment: str) -> bool:
    try:
        raw = base64.b64decode(segment.replace("-", "/"))
    except (binascii.Error, ValueError):
        return False
    return len(raw) == _RID_DB_BYTES


def resource_type_and_link(path: str) -> tuple[str, str]:
    """(resourceType, resourceLink) the SDK signed for a request to ``path``.

    ``path`` is the raw request path as it came off the wire (still percent-encoded; a query
    string, if any, is ignored). Decoding it first would corrupt ids that contain ``%``.
    """
    path = path.split("?", 1)[0].strip("/")
    if not path:
        return "", ""
    segments = [urllib.parse.unquote(s) for s in path.split("/")]
    if (
        len(segments) == 6
        and segments[2] == "colls"
        and segments[4] == "operations"
        and segments[5] == "partitionkeydelete"
    ):
        return "colls", _signed_link(segments[:4])
    if len(segments) % 2 == 1:
        return segments[-1], _signed_link(segments[:-1])
    return segments[-2], _signed_link(segments)


def _signed_link(segments: list[str]) -> str:
    if not segments:
        return ""
    full = "/".join(segments)
    if is_name_based(full):
        return full
    return segments[-1].lower()


def string_to_sign(verb: str, resource_type: str, resource_link: str, x_ms_date: str) -> str:
    """The exact text that is HMAC'd. ``resource_link`` is used as given (see module doc)."""
    return f"{verb.lower()}\n{resource_type.lower()}\n{resource_link}\n{x_ms_date.lower()}\n\n"


def _signature(key: bytes, text: str) -> str:
    digest = hmac.digest(key, text.encode("utf-8"), "sha256")    # one-shot: no HMAC object per request
    return base64.b64encode(digest).decode("ascii")


def _decode_key(key_b64: str) -> bytes:
    try:
        return base64.b64decode(key_b64, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"the account key is not valid base64: {e}") from None


def sign(key_b64: str, verb: str, resource_type: str, resource_link: str, x_ms_date: str) -> str:
    """The authorization value ``type=master&ver=1.0&sig=…``, not yet percent-encoded."""
    text = string_to_sign(verb, resource_type, resource_link, x_ms_date)
    sig = _signature(_decode_key(key_b64), text)
    return f"type={MASTER_TOKEN_TYPE}&ver={TOKEN_VERSION}&sig={sig}"


def authorization_header(
    key_b64: str, verb: str, resource_type: str, resource_link: str, x_ms_date: str
) -> str:
    """The ``authorization`` header value exactly as the SDK puts it on the wire."""
    token = sign(key_b64, verb, resource_type, resource_link, x_ms_date)
    return urllib.parse.quote(token, safe=_HEADER_SAFE_CHARS)


class MasterKeySigner:
    """Client-side signing with one account key, decoded once: ``header(...)`` equals
    ``authorization_header(key, ...)`` without decoding the key on every request."""

    # A signature is base64, so percent-encoding it touches only these three characters.
    _PREFIX = urllib.parse.quote(f"type={MASTER_TOKEN_TYPE}&ver={TOKEN_VERSION}&sig=", safe=_HEADER_SAFE_CHARS)
    _BASE64_ESCAPES = str.maketrans({"+": "%2B", "/": "%2F", "=": "%3D"})

    def __init__(self, key_b64: str):
        self._key = _decode_key(key_b64)

    def header(self, verb: str, resource_type: str, resource_link: str, x_ms_date: str) -> str:
        sig = _signature(self._key, string_to_sign(verb, resource_type, resource_link, x_ms_date))
        return self._PREFIX + sig.translate(self._BASE64_ESCAPES)


class ResourceTokenSigner:
    """Client-side authorization with resource tokens (a permission's ``_token``), as the SDKs
    do it: a request carries, verbatim and percent-encoded, the token keyed by the longest
    prefix of its name-based resource link (a container's link covers its items; an item's
    link only that item), and the account read (an empty link) carries any one of them. A link
    no token covers gets an empty header, which the service answers 401. ``header`` has
    ``MasterKeySigner.header``'s arguments, so either can sign a request."""

    def __init__(self, tokens: dict):
        if not tokens or not all(isinstance(k, str) and isinstance(v, str) for k, v in tokens.items()):
            raise TypeError("resource tokens are a non-empty dict of {resource link: token}, e.g. "
                            "{container_link: permission['_token']}")
        self._tokens = {link.strip("/"): urllib.parse.quote(token, safe=_HEADER_SAFE_CHARS)
                        for link, token in tokens.items()}
        self._any = next(iter(self._tokens.values()))

    def header(self, verb: str, resource_type: str, resource_link: str, x_ms_date: str) -> str:
        link = resource_link.strip("/")
        if not link:
            return self._any
        while link:
            token = self._tokens.get(link)
            if token is not None:
                return token
            link = link.rpartition("/")[0]
        return ""


def _parse_token(header_value: str) -> dict[str, str]:
    decoded = urllib.parse.unquote(header_value)
    fields: dict[str, str] = {}
    for part in decoded.split("&"):
        name, sep, value = part.partition("=")
        if not sep:
            raise AuthError(
                f"The authorization header is malformed: expected "
                f"'type=master&ver=1.0&sig=<signature>' (percent-encoded), got {decoded!r}."
            )
        fields[name.strip().lower()] = value.strip()
    for required in ("type", "ver", "sig"):
        if not fields.get(required):
            raise AuthError(
                f"The authorization header is malformed: the '{required}' field is missing "
                f"from {decoded!r}; expected 'type=master&ver=1.0&sig=<signature>'."
            )
    return fields


def is_resource_token(header_value: str) -> bool:
    """Whether an authorization header carries a resource token (``type=resource&...``, as the
    SDKs send a permission's ``_token``: verbatim, percent-encoded or not); the emulator checks
    those against its users' permissions instead of a master-key signature."""
    head = header_value[:18].lower()
    return head.startswith("type=resource&") or head.startswith("type%3dresource%26")


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _b64url_decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def emulator_aad_token(key_b64: str, now_s: float, lifetime_s: float = 7200) -> str:
    """A JWT the emulator's AAD emulation accepts, shaped as the SDKs' emulator tests mint it."""
    header = {"typ": "JWT", "alg": "RS256", "x5t": EMULATOR_AAD_KID, "kid": EMULATOR_AAD_KID}
    claims = {"aud": "https://localhost.localhost", "iat": int(now_s), "nbf": int(now_s),
              "exp": int(now_s + lifetime_s), "sub": "localhost", "tid": "EmulatorFederation",
              "ver": "1.0", "scp": "user_impersonation"}
    parts = (json.dumps(header).encode(), json.dumps(claims).encode(), key_b64.encode())
    return ".".join(_b64url(p) for p in parts)


def _aad_refusal(reason: str) -> AuthError:
    return AuthError(
        f"The AAD token is not valid: {reason}. regionlab accepts only the emulator's AAD "
        f"emulation: a JWT whose header has kid '{EMULATOR_AAD_KID}' and whose signature part is "
        "the base64url of the account key; use that, or master-key auth."
    )


def _aad_window(token: str, key_b64: str) -> tuple[float | None, float | None]:
    """(nbf, exp) in epoch seconds of an emulator AAD token signed with ``key_b64``; AuthError
    for any other token."""
    if len(token) > AAD_TOKEN_MAX_CHARS:
        raise _aad_refusal(f"it is {len(token)} characters, more than {AAD_TOKEN_MAX_CHARS}")
    parts = token.split(".")
    if len(parts) != 3:
        raise _aad_refusal("a JWT has three dot-separated parts")
    try:
        header, claims = (json.loads(_b64url_decode(p)) for p in parts[:2])
        signature = _b64url_decode(parts[2])
    except (binascii.Error, ValueError, RecursionError):
        raise _aad_refusal("its header or claims are not base64url-encoded JSON") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise _aad_refusal("its header and claims must be JSON objects")
    if header.get("kid") != EMULATOR_AAD_KID:
        raise _aad_refusal(f"its key id (kid) is {str(header.get('kid'))[:60]!r}")
    if not hmac.compare_digest(signature, key_b64.encode("ascii")):
        raise _aad_refusal("its signature is not the account key")
    return _claim_s(claims, "nbf"), _claim_s(claims, "exp")


def _claim_s(claims: dict, name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _aad_refusal(f"its '{name}' claim is not a number of seconds")
    return float(value)


def check_token_window(window: tuple[float | None, float | None], now_s: float, max_skew_s: float) -> None:
    """AuthError if an AAD token's (nbf, exp) window does not hold ``now_s``, give or take
    ``max_skew_s`` (0: the window is not checked, as the date is not)."""
    if not max_skew_s:
        return
    nbf_s, exp_s = window
    if exp_s is not None and now_s > exp_s + max_skew_s:
        raise AuthError(f"The AAD token expired at {email.utils.formatdate(exp_s, usegmt=True)}; "
                        "get a new token from the credential.")
    if nbf_s is not None and now_s < nbf_s - max_skew_s:
        raise AuthError(f"The AAD token is not valid before {email.utils.formatdate(nbf_s, usegmt=True)}; "
                        "check this machine's clock.")


class MasterKeyVerifier:
    """Server-side check of master-key signatures, for one account key.

    Accepted signatures are remembered (up to VERIFIED_CACHE_MAX_ENTRIES, oldest evicted first),
    keyed by everything that went into the decision, so a repeated identical request costs a dict
    lookup. Rejections are never cached. The signature does not say when a request was made,
    so the caller checks the date against its clock (``check_clock_skew``) on every request,
    cached or not.
    """

    def __init__(self, key_b64: str, cache_entries_max: int = VERIFIED_CACHE_MAX_ENTRIES):
        self._key_b64 = key_b64
        self._key = _decode_key(key_b64)
        self._cache_entries_max = cache_entries_max
        self._verified: dict[tuple[str, str, str, str], tuple | None] = {}

    def verify(self, verb: str, path: str, authorization: str | None,
               x_ms_date: str | None) -> tuple[float | None, float | None] | None:
        """Return if the request is signed with our key; raise AuthError saying why not.

        Returns None for a master-key signature, and an AAD token's (nbf, exp) window, for
        the caller to judge with ``check_token_window``. An AAD token is remembered by itself,
        since one token signs many requests."""
        cache_key = (verb, path, authorization or "", x_ms_date or "")
        if cache_key in self._verified:
            return self._verified[cache_key]
        if not authorization:
            raise AuthError(
                "The request has no 'authorization' header. Sign it with the account key "
                "(type=master&ver=1.0&sig=…)."
            )
        if not x_ms_date:
            raise AuthError(
                "The request has no 'x-ms-date' header. Send the current time in RFC 1123 form "
                "(e.g. 'Tue, 01 Jul 2025 12:00:00 GMT') and sign it."
            )
        if authorization == "None":
            raise AuthError(
                "The request's authorization header is 'None': the client holds no resource token that "
                "covers this resource (the Python SDK sends 'None' then). Key each token by the link of its "
                "container, e.g. {container.container_link: permission['_token']}, or use the account key."
            )
        token = _parse_token(authorization)
        if token["type"].lower() == AAD_TOKEN_TYPE:
            return self._verify_aad(token)
        if token["type"].lower() != MASTER_TOKEN_TYPE:
            raise AuthError(
                f"Only master-key authorization (type=master) and the emulator's AAD emulation "
                f"(type=aad) are supported; the request used type={token['type']}."
            )
        if token["ver"] != TOKEN_VERSION:
            raise AuthError(
                f"Unsupported authorization token version ver={token['ver']}; use ver=1.0."
            )
        resource_type, resource_link = resource_type_and_link(path)
        text = string_to_sign(verb, resource_type, resource_link, x_ms_date)
        expected = _signature(self._key, text)
        if not hmac.compare_digest(token["sig"].encode("ascii", "replace"), expected.encode("ascii")):
            shown = text.replace("\n", "\\n")
            raise AuthError(
                "The authorization signature does not match. Either the key is wrong or the "
                f"signed text differs from what the server expects. The server signed: '{shown}'"
            )
        self._remember(cache_key, None)
        return None

    def _verify_aad(self, token: dict[str, str]) -> tuple[float | None, float | None]:
        cache_key = (AAD_TOKEN_TYPE, "", token["sig"], "")
        window = self._verified.get(cache_key)
        if window is None:
            window = _aad_window(token["sig"], self._key_b64)
            self._remember(cache_key, window)
        return window

    def _remember(self, cache_key: tuple[str, str, str, str], value) -> None:
        if len(self._verified) >= self._cache_entries_max:
            del self._verified[next(iter(self._verified))]
        self._verified[cache_key] = value
