"""Response headers as callers see them (`get_response_headers()`, an error's `headers`): a dict
whose names match in any case, as azure-core's CaseInsensitiveDict, so `headers["ETag"]` and
`headers["etag"]` both work as they do with azure-cosmos. Names are stored in lower case, the
form the transports produce, so building one from a reply's headers costs a copy."""


class ResponseHeaders(dict):
    def __init__(self, data=None):
        super().__init__()
        for name, value in dict(data or {}).items():
            super().__setitem__(name.lower(), value)

    def __getitem__(self, name):
        return super().__getitem__(name.lower())

    def __setitem__(self, name, value):
        super().__setitem__(name.lower(), value)

    def __delitem__(self, name):
        super().__delitem__(name.lower())

    def __contains__(self, name):
        return isinstance(name, str) and super().__contains__(name.lower())

    def get(self, name, default=None):
        return super().get(name.lower(), default) if isinstance(name, str) else default

    def pop(self, name, *default):
        return super().pop(name.lower(), *default)
