"""A network guard: connections to anything but this machine raise, so a notebook that reaches out fails.

Installed in the test process by conftest.py and in every notebook kernel the tests start (through an
IPython startup file), so nbval and the browser test both run the series offline.
"""

import socket

LOCAL_NAMES = {"", "localhost", "::1", "0.0.0.0"}


def _is_local_host(host) -> bool:
    return host is None or str(host) in LOCAL_NAMES or str(host).startswith("127.")


class NetworkBlocked(OSError):
    """Raised instead of opening a connection off this machine."""


def _is_local(address) -> bool:
    return not isinstance(address, tuple) or _is_local_host(address[0])  # not a tuple: a Unix socket path


def _refuse(target) -> None:
    raise NetworkBlocked(f"network access to {target!r} is blocked: the series must work offline")


def install() -> None:
    if getattr(socket.socket.connect, "offline_guard", False):
        return
    connect, connect_ex, getaddrinfo = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo

    def guarded_connect(self, address):
        if not _is_local(address):
            _refuse(address)
        return connect(self, address)

    def guarded_connect_ex(self, address):
        if not _is_local(address):
            _refuse(address)
        return connect_ex(self, address)

    def guarded_getaddrinfo(host, *args, **kwargs):
        if not _is_local_host(host):
            _refuse(host)
        return getaddrinfo(host, *args, **kwargs)

    guarded_connect.offline_guard = True
    socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = (
        guarded_connect, guarded_connect_ex, guarded_getaddrinfo)
