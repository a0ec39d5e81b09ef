"""The local JupyterHub of `make hub` (tools/hub): a consistent config, 127.0.0.1 only, one hub at a time,
stopped by its PID with nothing left behind, and the nbgitpuller link."""

import importlib.util
import os
import re
import signal
import sys
import tomllib
import urllib.parse
from pathlib import Path

import pytest
from traitlets.config import Config

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "hub"))
import hub  # noqa: E402


def load_config(state: Path, port: int = 8765) -> Config:
    """The hub's config as JupyterHub reads it (its ``get_config``), for the given state folder and port."""
    (state / "api_token").write_text("t" * 64)
    config = Config()
    source = hub.CONFIG.read_text()
    environ = {"WALKTHROUGH_HUB_STATE": str(state), "WALKTHROUGH_HUB_PORT": str(port)}
    saved = {k: os.environ.get(k) for k in environ}
    os.environ.update(environ)
    try:
        exec(compile(source, str(hub.CONFIG), "exec"), {"get_config": lambda: config, "__file__": str(hub.CONFIG)})
    finally:
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)
    return config


def test_the_hub_listens_on_127_0_0_1_only_on_three_ports(tmp_path):
    c = load_config(tmp_path, port=9000)
    assert (c.JupyterHub.ip, c.JupyterHub.hub_ip) == ("127.0.0.1", "127.0.0.1")
    assert (c.JupyterHub.port, c.JupyterHub.hub_port) == (9000, 9001)
    assert c.ConfigurableHTTPProxy.api_url == "http://127.0.0.1:9002"
    assert all(str(tmp_path) in path for path in (c.JupyterHub.db_url, c.JupyterHub.cookie_secret_file,
                                                  c.JupyterHub.pid_file, c.SimpleLocalProcessSpawner.home_dir_template))


def test_every_program_the_config_names_is_in_the_venv(tmp_path):
    c = load_config(tmp_path)
    for program in (c.ConfigurableHTTPProxy.command[0], c.Spawner.cmd[0]):
        assert Path(program).is_file() and Path(program).parent == Path(sys.executable).parent, program
    culler = next(s for s in c.JupyterHub.services if s["name"] == "idle-culler")
    assert culler["command"][:3] == [sys.executable, "-m", "jupyterhub_idle_culler"]
    assert importlib.util.find_spec("jupyterhub_idle_culler") is not None
    notebook = re.fullmatch(r"/lab/tree/(.+)", c.Spawner.default_url).group(1)
    assert (ROOT / notebook).is_file(), "the page a student lands on exists"


def test_roles_name_the_services_and_the_extra_installs_what_the_config_uses(tmp_path):
    c = load_config(tmp_path)
    services = {s["name"] for s in c.JupyterHub.services}
    assert all(set(role["services"]) <= services for role in c.JupyterHub.load_roles)
    assert {role["name"] for role in c.JupyterHub.load_roles} == services, "every service has its scopes"
    token = next(s for s in c.JupyterHub.services if s["name"] == "class-bench")["api_token"]
    assert token == (tmp_path / "api_token").read_text()
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["hub"]
    assert {re.split(r"[<>=]", r)[0] for r in extra} == {"jupyterhub", "configurable-http-proxy",
                                                          "jupyterhub-idle-culler"}
    assert c.JupyterHub.authenticator_class == "dummy" and c.JupyterHub.spawner_class == "simple"


def test_each_student_gets_a_copy_of_the_notebooks_and_checkpoints(tmp_path):
    c = load_config(tmp_path)

    class Spawner:  # what the hook reads of JupyterHub's spawner
        home_dir_template = c.SimpleLocalProcessSpawner.home_dir_template
        user = type("User", (), {"name": "ada"})

    c.Spawner.pre_spawn_hook(Spawner)
    home = tmp_path / "users" / "ada"
    assert sorted(p.name for p in (home / "notebooks").glob("*.ipynb")) == sorted(
        p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert (home / "checkpoints" / "numerals.pt").read_bytes() == (ROOT / "checkpoints" / "numerals.pt").read_bytes()


def test_the_nbgitpuller_link_opens_notebook_00_of_this_repository():
    link = hub.nbgitpuller_link("https://hub.example.org/", repo="https://github.com/ada/transformer-by-hand")
    base, query = link.split("?")
    assert base == "https://hub.example.org/hub/user-redirect/git-pull"
    assert urllib.parse.parse_qs(query) == {"repo": ["https://github.com/ada/transformer-by-hand"],
                                            "branch": ["main"],
                                            "urlpath": ["lab/tree/transformer-by-hand/notebooks/00_overview.ipynb"]}
    with pytest.raises(hub.HubError, match=r"HUB must be the hub.s address such as https://hub\.example\.org"):
        hub.nbgitpuller_link("hub.example.org")


def processes_mentioning(marker: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in text and "pytest" not in text:
            found.append(text)
    return found


def test_the_hub_starts_refuses_a_second_start_and_stops_by_its_pid(tmp_path):
    port = next(p for p in range(19900, 20900, 3) if all(hub.port_free(q) for q in (p, p + 1, p + 2)))
    state = tmp_path / "hub"
    pid, address = hub.start(state, port)
    try:
        assert address == f"http://127.0.0.1:{port}"
        assert hub.running_pid(state) == pid
        info = hub.api(f"{address}/hub/api/", (state / "api_token").read_text())
        assert "version" in info
        with pytest.raises(hub.HubError, match=f"a hub is already running \\(PID {pid}.*make hub-stop"):
            hub.start(state, port)
    finally:
        assert hub.stop(state) == pid
    assert hub.running_pid(state) is None and not (state / "hub.pid").exists()
    assert processes_mentioning(str(state)) == [], "the proxy, the culler and the hub are all gone"
    assert hub.stop(state) is None


def test_a_port_in_use_is_named_before_anything_starts(tmp_path):
    import socket
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(hub.HubError, match=f"port {port} on 127.0.0.1 is in use.*HUB_PORT"):
            hub.start(tmp_path / "hub", port)
    assert not (tmp_path / "hub" / "hub.pid").exists()


def free_ports() -> int:
    return next(p for p in range(19900, 20900, 3) if all(hub.port_free(q) for q in (p, p + 1, p + 2)))


FAILING_HUB = """#!{python}
import os, subprocess, sys
# a hub that fails after starting its proxy, which JupyterHub starts in a session of its own
proxy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
with open(os.path.join(os.environ["WALKTHROUGH_HUB_STATE"], "proxy.pid"), "w") as file:
    file.write(str(proxy.pid))
sys.exit(1)
"""


def test_a_hub_that_fails_to_start_leaves_nothing_running(tmp_path, monkeypatch):
    """What `--port 0` did: the hub exited, its proxy kept listening, and hub.pid was gone, so `make hub-stop`
    could not stop it. Now the failed start stops what it started."""
    failing = tmp_path / "failing-hub"
    failing.write_text(FAILING_HUB.format(python=sys.executable))
    failing.chmod(0o755)
    monkeypatch.setattr(hub.sys, "executable", str(failing))  # start() runs `<python> -m jupyterhub ...`
    state = tmp_path / "hub"
    proxy = None
    try:
        with pytest.raises(hub.HubError, match=r"the hub exited \(code 1\) before it answered: see .*hub\.log"):
            hub.start(state, free_ports())
        proxy = int((state / "proxy.pid").read_text())
        assert not hub._alive(proxy), "the proxy the failed hub started is stopped with it"
        assert not (state / "hub.pid").exists() and hub.running_pid(state) is None
    finally:
        if proxy is not None and hub._alive(proxy):
            os.kill(proxy, signal.SIGKILL)


@pytest.mark.parametrize("port", ["0", "-5", "65534", "65535", "70000"])
def test_a_port_out_of_range_is_refused_before_anything_starts(tmp_path, capsys, port):
    assert hub.main(["start", "--port", port, "--state", str(tmp_path / "hub")]) == 2
    assert (f"error: the port must be a whole number from 1 to 65533 (the hub takes it and the next two), "
            f"got {port}") in capsys.readouterr().err
    assert not (tmp_path / "hub").exists()


class Started(Exception):
    """Raised where the hub's process would start: the test only needs what start() does before it."""


def test_the_api_token_is_created_readable_by_its_owner_only(tmp_path, monkeypatch):
    """Created 0600, not written with the umask's mode and chmodded after: never readable by others, even briefly."""
    modes_before_chmod = []
    chmod = Path.chmod

    def watched_chmod(self, mode, **kwargs):
        modes_before_chmod.append(self.stat().st_mode & 0o777)
        chmod(self, mode, **kwargs)

    def started(*args, **kwargs):
        raise Started
    monkeypatch.setattr(Path, "chmod", watched_chmod)
    monkeypatch.setattr(hub.subprocess, "Popen", started)
    state = tmp_path / "hub"
    umask = os.umask(0o022)
    try:
        with pytest.raises(Started):
            hub.start(state, free_ports())
    finally:
        os.umask(umask)
    assert (state / "api_token").stat().st_mode & 0o777 == 0o600
    assert all(mode == 0o600 for mode in modes_before_chmod), [oct(mode) for mode in modes_before_chmod]
    assert len((state / "api_token").read_text()) == 64
