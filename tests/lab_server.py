"""`make lab` / `make lab-zh` started as a teacher starts them, on a free port, with a throwaway HOME and project
state, for the tests that ask the running server what it serves."""

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Lab:
    port: int
    token: str
    home: Path  # where the user's own ~/.jupyter would be
    state: Path  # the project-local settings and workspaces (LAB_STATE)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}?token={self.token}"

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(self.url(path), timeout=60) as answer:
            return json.load(answer)

    def put(self, path: str, body: dict) -> None:
        request = urllib.request.Request(self.url(path), method="PUT", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json",
                                                  "Authorization": f"token {self.token}"})
        urllib.request.urlopen(request, timeout=60).close()


@contextlib.contextmanager
def started(target: str, tmp_path: Path):
    """Run `make <target>` until JupyterLab says it is running; stop the whole process group afterwards."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log, home, state = tmp_path / "lab.log", tmp_path / "home", tmp_path / "lab-state"
    with open(log, "w") as out:
        lab = subprocess.Popen(["make", target, f"LAB_STATE={state}",
                                f"LAB_ARGS=--no-browser --ip=127.0.0.1 --port={port}"], cwd=ROOT,
                               env={**os.environ, "HOME": str(home)}, stdout=out, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        # The server prints "is running at:" and the URL with its token on the next line: wait for the whole line.
        address = re.compile(r"http://127\.0\.0\.1:\d+/lab\?token=([0-9a-f]+)\n")
        deadline = time.monotonic() + 600  # a ceiling for a loaded machine, not an expectation
        while not address.search(log.read_text()) and time.monotonic() < deadline and lab.poll() is None:
            time.sleep(0.5)
        found = address.search(text := log.read_text())
        assert found, text[-2000:]
        yield Lab(port, found.group(1), home, state)
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        lab.wait(timeout=30)
