"""The emulator's AAD emulation, as the official emulator accepts it: the official SDK built with
`credential=` a TokenCredential (the DefaultAzureCredential code path) whose token is the JWT the
SDKs' own emulator tests mint (kid CosmosEmulatorPrimaryMaster, signature part = base64url of the
account key) does CRUD and a query over --https; a JWT with another kid, another signature or an
expired window is refused 401 with a message naming what to send. Real SDK, real sockets."""
import base64
import time

import pytest
from azure.core.credentials import AccessToken
from azure.cosmos import CosmosClient, PartitionKey
from azure.cosmos.exceptions import CosmosHttpResponseError

from regionlab.client.protocol.auth import emulator_aad_token
from regionlab.emulator.testing import running_emulator
from sdk_harness import CLIENT_DEFAULTS


class TokenCredential:
    """A credential as azure-identity's are: get_token(*scopes) -> AccessToken."""

    def __init__(self, token: str):
        self.token = token
        self.scopes = []

    def get_token(self, *scopes, **kwargs):
        self.scopes.append(scopes)
        return AccessToken(self.token, int(time.time()) + 3600)


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    # 127.0.0.1: the SDK skips certificate checks for it, and bearer tokens need https.
    with running_emulator(https=True, cert_dir=str(tmp_path_factory.mktemp("certs")), host="127.0.0.1") as e:
        yield e


def _client(emu, token: str, **kwargs) -> CosmosClient:
    return CosmosClient(emu.endpoint, credential=TokenCredential(token), **dict(CLIENT_DEFAULTS, **kwargs))


def test_the_emulator_aad_token_is_accepted_for_crud_and_queries(emu):
    credential = TokenCredential(emulator_aad_token(emu.key, time.time()))
    with CosmosClient(emu.endpoint, credential=credential, **CLIENT_DEFAULTS) as client:
        db = client.create_database_if_not_exists("aad")
        c = db.create_container_if_not_exists("items", PartitionKey(path="/pk"))
        c.upsert_item({"id": "a", "pk": "p", "n": 1})
        assert c.read_item("a", partition_key="p")["n"] == 1
        assert [d["id"] for d in c.query_items("SELECT * FROM c", partition_key="p")] == ["a"]
    assert credential.scopes                 # the SDK asked the credential, not a key


def _refusal(emu, token: str) -> CosmosHttpResponseError:
    with pytest.raises(CosmosHttpResponseError) as caught:
        with _client(emu, token, enable_endpoint_discovery=False) as client:
            client.get_database_client("aad").read()
    assert caught.value.status_code == 401
    return caught.value


def test_a_jwt_with_another_key_id_is_refused_401(emu):
    _, claims, signature = emulator_aad_token(emu.key, time.time()).split(".")
    header = base64.urlsafe_b64encode(b'{"typ":"JWT","alg":"RS256","kid":"SomeTenantKey"}').decode().rstrip("=")
    err = _refusal(emu, ".".join([header, claims, signature]))
    assert "kid" in err.message and "CosmosEmulatorPrimaryMaster" in err.message


def test_a_jwt_signed_with_another_key_is_refused_401(emu):
    other_key = "A" * 86 + "=="
    err = _refusal(emu, emulator_aad_token(other_key, time.time()))
    assert "signature is not the account key" in err.message


def test_an_expired_emulator_token_is_refused_401(emu):
    err = _refusal(emu, emulator_aad_token(emu.key, time.time() - 10 * 3600, lifetime_s=3600))
    assert "expired" in err.message


def test_garbage_in_place_of_a_jwt_is_refused_401(emu):
    err = _refusal(emu, "not-a-jwt")
    assert "three dot-separated parts" in err.message
