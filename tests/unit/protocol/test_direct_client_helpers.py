"""Proves the client helpers of client/protocol/direct.py: a request frame built by
`request_frame` decodes back to the documented fields in either version's shape, `named_reply`
reads the documented reply names only from a map (version 1) or an array (version 2) reply, and
the reply headers a client derives are the gateway's header names (client/protocol/headers.py)."""
import pytest

from regionlab.client.protocol import direct as D, headers as H


def test_a_version_1_request_frame_round_trips_through_the_decoder():
    frame = D.request_frame(1, 7, D.READ, D.replica_key("R", "0", 1), {"pk": '["p"]', "session": "0:1#5"}, item="a")
    (got,) = D.FrameDecoder().feed(D.encode(frame))
    assert D.frame_type(got) == D.REQUEST and D.reply_id(got) == 7
    assert got == frame and "body" not in got and got["pk"] == '["p"]' and got["session"] == "0:1#5"
    with_body = D.request_frame(1, 8, D.CREATE, "k", {}, body=b"{}")
    assert D.FrameDecoder().feed(D.encode(with_body))[0] == with_body


def test_a_version_2_request_frame_is_the_compact_array_of_the_same_fields():
    frame = D.request_frame(2, 7, D.READ, "k", {"pk": '["p"]', "session": "0:1#5"}, item="a")
    (got,) = D.FrameDecoder().feed(D.encode(frame))
    assert D.frame_type(got) == D.REQUEST and D.reply_id(got) == 7
    assert got == [D.REQUEST_CODE, 7, D.OPERATION_CODE[D.READ], "k", "a", '["p"]', None, {"session": "0:1#5"}]


def test_named_reply_keeps_the_documented_names_only():
    frame = {"t": D.RESPONSE, "id": 3, "status": 200, "sub": 0, "lsn": 4, "quorum_lsn": 4, "role": "secondary",
             "unknown": 1}
    assert D.named_reply(frame) == {"status": 200, "sub": 0, "lsn": 4, "quorum_lsn": 4, "role": "secondary"}


@pytest.mark.parametrize("version", [1, 2])
def test_named_reply_reads_both_versions_alike(version):
    fields = {"status": 404, "sub": 1002, "body": None, "lsn": 9, "session": "0:1#9", "role": "primary",
              "retry_after_ms": 5}
    if version == 1:
        frame = {"t": D.RESPONSE, "id": 1, **fields}
    else:
        values = {"id": 1, **fields}
        frame = [D.RESPONSE_CODE, *(values.get(n) for n in D.REPLY_FIELDS),
                 {n: fields[n] for n in D.EXTRA_REPLY_FIELDS if n in fields}]
    (got,) = D.FrameDecoder().feed(D.encode(frame))
    assert D.reply_id(got) == 1
    assert D.named_reply(got) == fields


def test_reply_headers_are_the_gateways_header_names():
    headers = dict(D.REPLY_HEADERS)
    assert headers["session"] == H.SESSION_TOKEN and headers["continuation"] == H.CONTINUATION
    assert headers["etag"] == H.ETAG and headers["item_count"] == H.ITEM_COUNT
    assert headers["retry_after_ms"] == H.RETRY_AFTER_MS and headers["item_lsn"] == H.LSN
    assert headers["activity_id"] == H.ACTIVITY_ID
    assert set(headers) <= set(D.NAMED_REPLY_FIELDS)


def test_challenge_and_error_fields():
    assert D.error_fields({"t": D.ERROR, "status": 401, "sub": 0, "message": "no"}) == (401, 0, "no")
    c = D.challenge_fields({"t": D.CHALLENGE, "nonce": b"n" * D.NONCE_BYTES, "heartbeat_ms": 15000})
    assert c["nonce"] == b"n" * D.NONCE_BYTES and c["heartbeat_ms"] == 15000 and c["idle_timeout_ms"] is None
