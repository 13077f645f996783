"""Proves service/resource_tokens.py's tokens are unforgeable and its cache bounded, without a
server: a minted token gives back exactly its permission's rid, times and grant; changing any
byte of its claims or signature, or verifying under another account key, is a 401 AuthError (a
claim is never widened); the service's shape survives percent-encoding as the SDKs send it; and
many distinct tokens never hold more than the cache's byte budget."""
import base64
import json
import urllib.parse

import pytest

from regionlab.client.protocol.auth import AuthError, is_resource_token
from regionlab.emulator.core.limits import RESOURCE_TOKENS_CACHE_MAX_BYTES
from regionlab.emulator.core.users import ALL, READ, Grant
from regionlab.emulator.service.resource_tokens import TOKEN_PREFIX, ResourceTokens

KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
OTHER_KEY = "dGhpcyBpcyBub3QgdGhlIGFjY291bnQga2V5LCBpdCBpcyBhIGRpZmZlcmVudCBvbmU="


class Perm:
    """What mint reads of a permission: its rid and grant."""

    def __init__(self, rid: str, grant: Grant):
        self.rid, self.grant = rid, grant


def test_a_token_gives_back_what_it_was_minted_for():
    grant = Grant(READ, "AAAAAYAAAAM=", "item-1", '["tenant"]')
    token = ResourceTokens(KEY).mint(Perm("AAAAAQAAAAUHAAAAAAAAAA==", grant), 1_000, 3600)
    assert token.startswith(TOKEN_PREFIX) and token.endswith(";") and is_resource_token(token)
    for sent in (token, urllib.parse.quote(token, safe="-_.!~*'()")):      # as given, as the SDK sends it
        claims = ResourceTokens(KEY).claims(sent)
        assert (claims.permission_rid, claims.issued_s, claims.expires_s, claims.grant) == \
            ("AAAAAQAAAAUHAAAAAAAAAA==", 1_000, 4_600, grant)


def _parts(token: str) -> tuple:
    sig, claims, _ = token[len(TOKEN_PREFIX):].split(";")
    return sig, claims


@pytest.mark.parametrize("change", [
    lambda c: c.__setitem__(3, ALL),                 # Read -> All
    lambda c: c.__setitem__(2, c[2] + 10 ** 6),      # a later expiry
    lambda c: c.__setitem__(4, "AAAAAYAAAAQ="),      # another container
    lambda c: c.__setitem__(6, None),                # drop the partition key
])
def test_widened_claims_are_refused(change):
    tokens = ResourceTokens(KEY)
    token = tokens.mint(Perm("AAAAAQAAAAUHAAAAAAAAAA==", Grant(READ, "AAAAAYAAAAM=", None, '["t"]')), 0, 60)
    sig, claims = _parts(token)
    values = json.loads(base64.b64decode(claims))
    change(values)
    forged = f"{TOKEN_PREFIX}{sig};{base64.b64encode(json.dumps(values).encode()).decode()};"
    with pytest.raises(AuthError, match="signature does not match"):
        tokens.claims(forged)


def test_another_key_or_a_broken_shape_is_refused():
    token = ResourceTokens(OTHER_KEY).mint(Perm("AAAAAQAAAAUHAAAAAAAAAA==", Grant(ALL, "AAAAAYAAAAM=")), 0, 60)
    tokens = ResourceTokens(KEY)
    with pytest.raises(AuthError, match="signature does not match"):
        tokens.claims(token)
    sig, claims = _parts(token)
    for bad in (f"{TOKEN_PREFIX}{sig};{claims}", f"{TOKEN_PREFIX}{sig}", "type=master&ver=1.0&sig=x",
                f"{TOKEN_PREFIX}{sig};not base64!;", f"{TOKEN_PREFIX};;"):
        with pytest.raises(AuthError):
            tokens.claims(bad)


def test_verified_tokens_stay_within_the_cache_budget():
    tokens = ResourceTokens(KEY)
    grant = Grant(ALL, "AAAAAYAAAAM=", "x" * 200, '["' + "k" * 200 + '"]')
    for i in range(2_000):                          # about 2.5x the budget
        tokens.claims(tokens.mint(Perm("AAAAAQAAAAUHAAAAAAAAAA==", grant), i, 60))
    assert 0 < tokens._verified.nbytes <= RESOURCE_TOKENS_CACHE_MAX_BYTES
