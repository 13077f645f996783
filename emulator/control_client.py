"""The command line's side of the control port (docs/control-api.md): where it is, one request
and its JSON reply (or a ControlError saying why not), and the reply printed. `regionlab <command>`
(ctl.py), `regionlab drill` against a running emulator, the fault handle of `running_emulator` and
the drill runner all talk to the port through `call`, with the standard library's urllib."""
import json
import os
import sys
import urllib.error
import urllib.request

from .profile import PROFILES, profile_name

DEFAULT_CONTROL = "http://127.0.0.1:8090"
HTTP_TIMEOUT_S = 90.0          # a graceful failover waits for the drain (up to 60 s) before it answers


class ControlError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def control_url(explicit: str | None) -> str:
    """--control, else $REGIONLAB_CONTROL, else the local control port of the profile that
    $REGIONLAB_PROFILE names (the same variable the server reads), else DEFAULT_CONTROL."""
    return (explicit or os.environ.get("REGIONLAB_CONTROL") or _profile_control()).rstrip("/")


def _profile_control() -> str:
    try:
        port = PROFILES[profile_name(os.environ.get("REGIONLAB_PROFILE", "default"))].defaults.get("control_port")
    except ValueError:
        return DEFAULT_CONTROL
    return f"http://127.0.0.1:{port}" if port else DEFAULT_CONTROL


def control_token(explicit: str | None) -> str | None:
    return explicit or os.environ.get("REGIONLAB_CONTROL_TOKEN") or None


def call(base: str, method: str, path: str, body=None, token: str | None = None):
    """The reply's JSON; ControlError for an error reply or an unreachable port."""
    data = None if body is None else json.dumps(body).encode()
    headers = {} if method in ("GET", "HEAD") else {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as resp:
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            message = json.loads(raw).get("error") or raw.decode()
        except (ValueError, AttributeError):
            message = raw.decode(errors="replace") or e.reason
        raise ControlError(e.code, f"{method} {path}: {e.code} {message}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise ControlError(0, f"cannot reach the control port at {base}: {reason}") from None


def print_reply(text: str, out) -> int:
    """Write the reply; a reader that went away (`regionlab lost-writes | head`) is no error."""
    try:
        print(text, file=out)
        out.flush()
    except BrokenPipeError:
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        if out is sys.stdout:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
    return 0
