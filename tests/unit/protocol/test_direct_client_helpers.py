"""Proves the client helpers of client/protocol/direct.py: a request frame built by `request`
decodes back to the documented fields, `reply_fields` reads the documented reply names only, and
the reply headers a client derives are the gateway's header names (client/protocol/headers.py)."""
from client.protocol import direct as D, headers as H


def test_a_request_frame_round_trips_through_the_decoder():
    frame = D.request(7, D.READ, D.replica_key("R", "0", 1), {"pk": '["p"]', "session": "0:1#5"}, item="a")
    (got,) = D.FrameDecoder().feed(D.encode(frame))
    assert D.frame_type(got) == D.REQUEST and D.reply_id(got) == 7
    assert got == frame and "body" not in got
    with_body = D.request(8, D.CREATE, "k", {}, body=b"{}")
    assert D.FrameDecoder().feed(D.encode(with_body))[0] == with_body


def test_reply_fields_keep_the_documented_names_only():
    frame = {"t": D.RESPONSE, "id": 3, "status": 200, "sub": 0, "lsn": 4, "quorum_lsn": 4, "role": "secondary",
             "unknown": 1}
    assert D.reply_fields(frame) == {"status": 200, "sub": 0, "lsn": 4, "quorum_lsn": 4, "role": "secondary"}


def test_reply_headers_are_the_gateways_header_names():
    headers = dict(D.REPLY_HEADERS)
    assert headers["session"] == H.SESSION_TOKEN and headers["continuation"] == H.CONTINUATION
    assert headers["etag"] == H.ETAG and headers["item_count"] == H.ITEM_COUNT
    assert headers["retry_after_ms"] == H.RETRY_AFTER_MS and headers["item_lsn"] == H.LSN
    assert headers["activity_id"] == H.ACTIVITY_ID
    assert set(headers) <= set(D.REPLY_FIELDS)


def test_challenge_and_error_fields():
    assert D.error_fields({"t": D.ERROR, "status": 401, "sub": 0, "message": "no"}) == (401, 0, "no")
    c = D.challenge_fields({"t": D.CHALLENGE, "nonce": b"n" * D.NONCE_BYTES, "heartbeat_ms": 15000})
    assert c["nonce"] == b"n" * D.NONCE_BYTES and c["heartbeat_ms"] == 15000 and c["idle_timeout_ms"] is None
