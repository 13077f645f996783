"""emulator/logs.py writes every record as exactly one JSON object on one line — messages with
quotes and newlines, exceptions (the traceback is the "exc" field), structured fields — through a
real logging handler into a buffer."""
import io
import json
import logging

import pytest

from regionlab.emulator import logs


@pytest.fixture
def lines():
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logs.JsonFormatter())
    logger = logging.getLogger("regionlab.test_logs")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield logger, lambda: [json.loads(line) for line in buffer.getvalue().splitlines()]
    finally:
        logger.removeHandler(handler)


def test_a_message_with_quotes_and_newlines_is_one_json_line(lines):
    logger, read = lines
    logger.warning("it's \"quoted\"\nand %s", "two\nlines")
    [line] = read()
    assert line["msg"] == "it's \"quoted\"\nand two\nlines"
    assert (line["level"], line["logger"]) == ("WARNING", "regionlab.test_logs")
    assert line["ts"].endswith("Z") and line["ts"][10] == "T"


def test_an_exception_is_a_field_not_extra_lines(lines):
    logger, read = lines
    try:
        {}["missing"]
    except KeyError:
        logger.exception("internal error on %s %s", "GET", "/dbs")
    [line] = read()
    assert line["msg"] == "internal error on GET /dbs"
    assert line["exc"].startswith("Traceback") and "KeyError: 'missing'" in line["exc"]


def test_fields_join_the_object_without_overwriting_the_core_keys(lines):
    logger, read = lines
    logger.debug("request", extra={"fields": {"method": "GET", "status": 200, "msg": "spoof", "duration_ms": 1.5}})
    [line] = read()
    assert line["msg"] == "request" and line["method"] == "GET" and line["status"] == 200
    assert line["duration_ms"] == 1.5
