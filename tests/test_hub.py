"""The local JupyterHub of `make hub` (tools/hub): a consistent config, 127.0.0.1 only, one hub at a time,
stopped by its PID with nothing left behind, and the nbgitpuller link."""

import importlib.util
import os
import re
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
