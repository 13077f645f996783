"""The client's errors, named as `azure.cosmos.exceptions` names them so code moves between the two
by changing an import.

Every error carries the status and substatus the service sent (`status_code`, `sub_status`), the
request charge of the whole operation (every attempt, retries and hedges included) and its
`diagnostics`. `error_for` picks the class the official SDK raises for a status.
"""
from regionlab.client.headers import ResponseHeaders
from regionlab.client.protocol import status as S


class CosmosHttpResponseError(Exception):
    """The service (or the client's own limits) refused the operation."""

    def __init__(self, status_code: int | None = None, message: str = "", *, sub_status: int = 0,
                 headers=None, diagnostics=None, request_charge: float = 0.0, body=None):
        self.status_code = status_code
        self.sub_status = sub_status
        self.message = message
        self.headers = ResponseHeaders(headers)
        self.diagnostics = diagnostics
        self.request_charge = request_charge
        self.body = body
        super().__init__(f"({status_code}/{sub_status}) {message}" if status_code else message)

    @property
    def substatus(self) -> int:
        return self.sub_status


class CosmosResourceNotFoundError(CosmosHttpResponseError):
    """404: the resource does not exist (or 404/1002: the session is not yet readable)."""


class CosmosResourceExistsError(CosmosHttpResponseError):
    """409: a resource with this id (and partition key) exists."""


class CosmosAccessConditionFailedError(CosmosHttpResponseError):
    """412: an if-match etag or a patch condition did not hold."""


class CosmosClientTimeoutError(CosmosHttpResponseError):
    """The end-to-end timeout passed before the operation finished; every attempt was cancelled."""

    def __init__(self, message: str = "", **kwargs):
        super().__init__(S.REQUEST_TIMEOUT, message, **kwargs)


class CosmosBatchOperationError(CosmosHttpResponseError):
    """207: one operation of a transactional batch failed, so none was applied."""

    def __init__(self, error_index: int, operation_responses: list, **kwargs):
        self.error_index = error_index
        self.operation_responses = operation_responses
        super().__init__(**kwargs)


# azure.cosmos.exceptions re-exports azure-core's classes, which its errors derive from; here the
# names stand for this client's classes, so `except ResourceNotFoundError` catches its 404s.
AzureError = HttpResponseError = CosmosHttpResponseError
ResourceNotFoundError = CosmosResourceNotFoundError
ResourceExistsError = CosmosResourceExistsError

_BY_STATUS = {S.NOT_FOUND: CosmosResourceNotFoundError, S.CONFLICT: CosmosResourceExistsError,
              S.PRECONDITION_FAILED: CosmosAccessConditionFailedError}


def error_for(status: int, message: str, **kwargs) -> CosmosHttpResponseError:
    return _BY_STATUS.get(status, CosmosHttpResponseError)(status, message, **kwargs)
