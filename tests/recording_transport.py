"""A transport for driving a protocol (the gateway's HTTP connection, a direct node) by direct
data_received calls: it records what the server writes, and whether it closed or wrote EOF."""


class RecordingTransport:
    def __init__(self):
        self.written = b""
        self.closed = False
        self.eof = False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    abort = close

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name, default=None):
        return default
