"""Listening sockets: bound before anything serves (ports may be 0, for tests), and the process's
file limit raised so that every endpoint can hold its connections."""
import logging
import resource
import socket

log = logging.getLogger("regionlab")

LISTEN_BACKLOG = 1024


def bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise OSError(e.errno, f"cannot listen on {host}:{port}: {e.strerror}") from None
    sock.listen(LISTEN_BACKLOG)
    sock.setblocking(False)
    return sock


def raise_file_limit() -> int:
    """Raise the soft limit on open files to the hard one (the default soft limit is often
    1,024, shared by every listener and connection of the process); the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft >= hard:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as e:
        log.debug("cannot raise the open-file limit from %d to %d: %s", soft, hard, e)
        return soft
    return hard
