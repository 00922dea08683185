"""A bare TCP server on 127.0.0.1 for the REST client's tests: what real HTTP servers won't do (cut an
answer short, answer with something that is not HTTP, never answer, refuse a certificate)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["raw_server", "read_request"]


@contextmanager
def raw_server(answer: Callable[[socket.socket], None], scheme: str = "http") -> Iterator[str]:
    """Hand each accepted connection to ``answer`` on a thread of its own; yields the server's URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()
    accepted: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            accepted.append(conn)
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"{scheme}://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        listener.close()
        for conn in accepted:
            conn.close()


def read_request(conn: socket.socket) -> bytes:
    """A request's head (its line and headers), or what came before the client stopped sending."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data
