"""Start, stop and link a local JupyterHub for the series: ``python tools/hub/hub.py start|stop|status|link``.

``start`` runs ``jupyterhub`` (config: tools/hub/jupyterhub_config.py) in its own session, writes its PID,
waits until its API answers and prints the address; a second ``start`` while one runs is refused.
``stop`` ends it by that PID (SIGTERM: the hub stops every student's server and its proxy), then the
whole session if anything is left. ``link HUB_URL`` prints the nbgitpuller link for students.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = Path(__file__).with_name("jupyterhub_config.py")
DEFAULT_STATE = ROOT / ".hub"
DEFAULT_PORT = 8765  # the hub's page; the hub's own API and the proxy's API take the next two ports
LAST_PORT = 65535 - 2  # the three ports must exist
STATE_VARIABLE = "WALKTHROUGH_HUB_STATE"  # the hub's folder, in the environment of every process the hub starts


class HubError(Exception):
    """A request the hub tool refuses, with what to do instead."""


def running_pid(state: Path) -> int | None:
    """The PID of this folder's running hub, or None (a PID file left by a crash is not a running hub)."""
    pid_file = state / "hub.pid"
    try:
        pid = int(pid_file.read_text())
        os.kill(pid, 0)
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None
    return pid


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def api(url: str, token: str, method: str = "GET", body: dict | None = None) -> dict | list | None:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        text = response.read()
    return json.loads(text) if text else None


def check_port(port) -> None:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= LAST_PORT:
        raise HubError(f"the port must be a whole number from 1 to {LAST_PORT} (the hub takes it and the next two), "
                       f"got {port!r}: e.g. `make hub HUB_PORT={DEFAULT_PORT}`")


def start(state: Path = DEFAULT_STATE, port: int = DEFAULT_PORT) -> tuple[int, str]:
    """Start the hub (refused if one runs, or a port is taken); return (its PID, its address) once it answers.

    A hub that exits before it answers is stopped with everything it started (its proxy, its services): nothing
    is left listening, and ``hub.pid`` names no process."""
    check_port(port)
    pid = running_pid(state)
    if pid is not None:
        raise HubError(f"a hub is already running (PID {pid}, state {state}): open http://127.0.0.1:{port}/ "
                       f"or stop it first with `make hub-stop`")
    busy = [p for p in (port, port + 1, port + 2) if not port_free(p)]
    if busy:
        raise HubError(f"port {busy[0]} on 127.0.0.1 is in use by another program: the hub needs ports {port}-"
                       f"{port + 2}; pick others with `make hub HUB_PORT=8865`")
    state.mkdir(parents=True, exist_ok=True)
    token_file = state / "api_token"
    if not token_file.exists():  # created readable by its owner only: never, even for a moment, by anyone else
        with os.fdopen(os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
            file.write(secrets.token_hex(32))
    log = open(state / "hub.log", "ab")
    hub = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(CONFIG)], cwd=state, stdout=log,
                           stderr=subprocess.STDOUT, start_new_session=True,
                           env=os.environ | {STATE_VARIABLE: str(state), "WALKTHROUGH_HUB_PORT": str(port)})
    (state / "hub.pid").write_text(str(hub.pid))
    address = f"http://127.0.0.1:{port}"
    while True:  # bounded by the hub itself: it either answers or exits
        if hub.poll() is not None:
            _kill_what_it_started(state, hub.pid)  # the proxy it started before failing would outlive it
            (state / "hub.pid").unlink(missing_ok=True)
            raise HubError(f"the hub exited (code {hub.returncode}) before it answered: see {state / 'hub.log'}")
        try:
            api(f"{address}/hub/api/", token_file.read_text().strip())
            return hub.pid, address
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.5)


def stop(state: Path = DEFAULT_STATE, patience: float = 60.0) -> int | None:
    """Stop this folder's hub by its PID; return the PID stopped, or None if none was running."""
    pid = running_pid(state)
    if pid is None:
        (state / "hub.pid").unlink(missing_ok=True)
        return None
    os.kill(pid, signal.SIGTERM)  # the hub's own shutdown stops the students' servers and the proxy
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.2)
    _kill_what_it_started(state, pid)
    (state / "hub.pid").unlink(missing_ok=True)
    return pid


def _kill_what_it_started(state: Path, pid: int) -> None:
    """Kill whatever outlived the hub ``pid`` or its clean stop, and wait until it is gone: its session
    (start_new_session), and the processes it started in sessions of their own (the proxy, the services,
    the students' servers), known by the state folder in their environment."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:  # nothing is left in its session
        pass
    marker = f"{STATE_VARIABLE}={state}".encode() + b"\0"
    left = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        other = int(environ.parent.name)
        try:
            if other != os.getpid() and marker in b"\0" + environ.read_bytes():
                os.kill(other, signal.SIGKILL)
                left.append(other)
        except OSError:  # gone meanwhile, or another user's
            continue
    while _alive(pid) or any(_alive(other) for other in left):
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)  # our own child: reap it
        if finished:
            return False
    except ChildProcessError:
        pass  # started by another `make hub`: not ours to reap
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def repository_url() -> str:
    """This repository on GitHub, from binder/repository (owner/name, set by `make binder-links`)."""
    return f"https://github.com/{(ROOT / 'binder' / 'repository').read_text().strip()}"


def nbgitpuller_link(hub_url: str, repo: str | None = None, branch: str = "main",
                     notebook: str = "notebooks/00_overview.ipynb") -> str:
    """The one-click link: the hub clones (or updates) the repository into each student's home and opens the
    notebook in JupyterLab. The hub must have nbgitpuller installed."""
    if not hub_url.startswith(("http://", "https://")):
        raise HubError(f"HUB must be the hub's address such as https://hub.example.org, got {hub_url!r}")
    repo = repo or repository_url()
    folder = repo.rstrip("/").split("/")[-1].removesuffix(".git")
    query = urllib.parse.urlencode({"repo": repo, "branch": branch, "urlpath": f"lab/tree/{folder}/{notebook}"})
    return f"{hub_url.rstrip('/')}/hub/user-redirect/git-pull?{query}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/hub/hub.py", description=__doc__)
    parser.add_argument("command", choices=("start", "stop", "status", "link"))
    parser.add_argument("hub_url", nargs="?", help="link: the hub's address, e.g. https://hub.example.org")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--state", type=Path, default=DEFAULT_STATE, help="the hub's folder (database, logs, homes)")
    parser.add_argument("--branch", default="main")
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            pid, address = start(args.state, args.port)
            print(f"JupyterHub running (PID {pid}): open {address}/ and log in with any name "
                  f"(no password; 127.0.0.1 only). Stop it with `make hub-stop`.")
        elif args.command == "stop":
            pid = stop(args.state)
            print(f"stopped the hub (PID {pid})" if pid else "no hub was running")
        elif args.command == "status":
            pid = running_pid(args.state)
            print(f"a hub is running (PID {pid})" if pid else "no hub is running")
        else:
            if not args.hub_url:
                raise HubError("give the hub's address: make hub-link HUB=https://hub.example.org")
            print(nbgitpuller_link(args.hub_url, branch=args.branch))
    except HubError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
