"""The server's stderr log: one JSON object per line, whatever the message or exception.

Every record becomes {"ts", "level", "logger", "msg"}, plus "exc" (the formatted traceback,
one string) when it carries one, plus the fields a caller passes as `extra={"fields": {...}}`
(the gateway's per-request DEBUG line: method, path, status, region, duration_ms). A line
never spans lines: json.dumps escapes every newline.
"""
import json
import logging
import sys
import time


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {"ts": _timestamp(record.created), "level": record.levelname, "logger": record.name,
                "msg": record.getMessage()}
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update({k: v for k, v in fields.items() if k not in line})
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str, ensure_ascii=False)


def _timestamp(created: float) -> str:
    """UTC, ISO 8601, milliseconds: 2026-12-01T10:00:00.123Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(created % 1 * 1000):03d}Z"


def configure(level: str, stream=None) -> None:
    """JSON lines on stderr at `level` for every logger (ours, aiohttp's, asyncio's)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)            # warnings.warn(...) becomes a JSON line too
    sys.excepthook = _log_uncaught


def _log_uncaught(kind, value, tb) -> None:
    """A crash outside any handler is still one JSON line, with its traceback in "exc"."""
    logging.getLogger("regionlab").critical("uncaught %s: %s", kind.__name__, value, exc_info=(kind, value, tb))
