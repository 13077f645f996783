"""Holding a listener's port while a fault keeps it closed.

A `refuse` outage (and a node a fault took down) closes the listening socket so that clients
see refused connections. A closed port is free for anyone, though: the kernel hands free ports
out as the local port of outgoing connections and to bind(0), and on a busy machine one of them
takes it, so the endpoint cannot listen again when the fault heals. A hold is a bound socket
that never listens: a SYN to it is answered RST, exactly as a closed port's, but the kernel
will not give the port to anyone else. Both the hold and the listener set SO_REUSEADDR, which
on Linux lets the listener bind beside the hold; the hold is closed once the listener is up.
"""
import asyncio
import socket

HOLD_TURNS_MAX = 100          # loop turns to wait for a just-closed listener to free its port


def hold_now(host: str, port: int) -> socket.socket | None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        return None
    return sock


class PortHold:
    """Holds (host, port) from now until `release()`; `taken` is set once it holds."""

    def __init__(self, host: str, port: int):
        self.sock = hold_now(host, port)
        self._task = None
        if self.sock is None:       # the listener's close has not reached the kernel yet
            self._task = asyncio.get_running_loop().create_task(self._retry(host, port))

    async def _retry(self, host: str, port: int) -> None:
        for _ in range(HOLD_TURNS_MAX):
            await asyncio.sleep(0)
            self.sock = hold_now(host, port)
            if self.sock is not None:
                return

    def release(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self.sock is not None:
            self.sock.close()
            self.sock = None
