import socket

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from .offline import NetworkBlocked


def test_guard_refuses_other_hosts_and_allows_loopback():
    with pytest.raises(NetworkBlocked, match="must work offline"):
        socket.create_connection(("example.invalid", 80), timeout=1)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname(), timeout=1):
            pass


def test_notebook_kernels_run_with_the_guard():
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import socket\nsocket.create_connection(('example.invalid', 80), timeout=1)")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    with pytest.raises(CellExecutionError, match="NetworkBlocked"):
        NotebookClient(notebook, timeout=None, startup_timeout=600).execute()
