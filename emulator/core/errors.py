"""Every error the core can raise, with the status and substatus the real service uses.

`definite` follows Maelstrom: True means the operation certainly did not happen (nothing was
applied); False means it may have happened (e.g. a write that reached the primary but whose
quorum acknowledgement never came). The gateway turns a CosmosError into an HTTP reply with
`x-ms-substatus` and a `{"code","message"}` body; the status -> code table lives in
client/protocol/status.py so the client and the emulator agree on it.
"""


class CosmosError(Exception):
    __slots__ = ("status", "substatus", "message", "definite", "retry_after_ms")

    def __init__(self, status: int, substatus: int, message: str, *, definite: bool = True,
                 retry_after_ms: int | None = None):
        super().__init__(message)
        self.status = status
        self.substatus = substatus
        self.message = message
        self.definite = definite
        self.retry_after_ms = retry_after_ms

    def __repr__(self):
        return f"CosmosError({self.status}/{self.substatus}: {self.message})"


def bad_request(message: str, substatus: int = 0) -> CosmosError:
    return CosmosError(400, substatus, message)


def not_found(message: str = "Entity with the specified id does not exist in the system.") -> CosmosError:
    return CosmosError(404, 0, message)


def conflict(message: str = "Entity with the specified id already exists in the system.") -> CosmosError:
    return CosmosError(409, 0, message)


def precondition_failed(message: str = "One of the specified pre-condition is not met.") -> CosmosError:
    return CosmosError(412, 0, message)


def too_large(message: str) -> CosmosError:
    return CosmosError(413, 0, message)


# Substatus values the core raises itself (the full table is client/protocol/status.py).
SUB_PARTITION_KEY_MISMATCH = 1001
SUB_READ_SESSION_NOT_AVAILABLE = 1002
SUB_WRITE_FORBIDDEN = 3
SUB_NO_QUORUM = 0


def write_forbidden(region: str) -> CosmosError:
    return CosmosError(403, SUB_WRITE_FORBIDDEN,
                       f"The requested operation cannot be performed at this region ({region}): "
                       "it is not a write region of the account.")


def session_not_available(region: str, wanted_lsn: int, have_lsn: int) -> CosmosError:
    return CosmosError(404, SUB_READ_SESSION_NOT_AVAILABLE,
                       f"The read session is not available for the input session token: region "
                       f"{region} has applied LSN {have_lsn}, the session needs {wanted_lsn}.")


def service_unavailable(message: str, *, definite: bool = True) -> CosmosError:
    return CosmosError(503, 0, message, definite=definite)
