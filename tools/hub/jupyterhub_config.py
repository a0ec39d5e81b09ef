"""A local JupyterHub for trying the series as a class would (``make hub``): 127.0.0.1 only, every user a
local process of this machine's user, every server from the project's venv (so its JupyterLab settings).

Read by ``jupyterhub -f tools/hub/jupyterhub_config.py``; ``tools/hub/hub.py`` sets the environment below
(state folder, ports) and starts and stops the hub by its PID. Not for a real class: anyone who can reach
127.0.0.1 logs in with any name (DummyAuthenticator). A real hub: docs/serving.md.
"""

import os
import shutil
import sys
from pathlib import Path

c = get_config()  # noqa: F821 (JupyterHub's config loader provides it)

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent  # the hub runs on the project's venv; so does every user's server
STATE = Path(os.environ["WALKTHROUGH_HUB_STATE"])
PORT = int(os.environ["WALKTHROUGH_HUB_PORT"])

c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = PORT
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = PORT + 1
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{PORT + 2}"
c.ConfigurableHTTPProxy.command = [str(VENV_BIN / "configurable-http-proxy")]  # the pure-Python port (PyPI)
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True  # stopping the hub stops every student's server with it

c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allow_all = True
c.Authenticator.admin_users = {"teacher"}

c.JupyterHub.spawner_class = "simple"  # SimpleLocalProcessSpawner: servers as local processes of one user
c.SimpleLocalProcessSpawner.home_dir_template = str(STATE / "users" / "{username}")
c.Spawner.cmd = [str(VENV_BIN / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab/tree/notebooks/00_overview.ipynb"
c.Spawner.args = ["--allow-root"] if os.geteuid() == 0 else []  # as root Jupyter refuses to start without it
# one thread per kernel (a class shares the cores); the state folder marks the server as this hub's (hub.py stop)
c.Spawner.environment = {"OMP_NUM_THREADS": "1", "WALKTHROUGH_HUB_STATE": str(STATE)}
c.Spawner.http_timeout = 300  # a loaded server starts slowly; not a failure
c.Spawner.start_timeout = 300


def copy_the_series(spawner) -> None:
    """Each student's home gets the notebooks and the shipped checkpoints once (their edits stay theirs)."""
    home = Path(spawner.home_dir_template.format(username=spawner.user.name))
    home.mkdir(parents=True, exist_ok=True)
    for folder in ("notebooks", "checkpoints"):
        if not (home / folder).exists():
            shutil.copytree(ROOT / folder, home / folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))


c.Spawner.pre_spawn_hook = copy_the_series

# A service that may create students, start their servers and use them (benchmarks/bench_class.py),
# with its token in the state folder; and the idle culler (a server idle for an hour is stopped).
c.JupyterHub.services = [
    {"name": "class-bench", "api_token": (STATE / "api_token").read_text().strip()},
    {"name": "idle-culler", "command": [sys.executable, "-m", "jupyterhub_idle_culler", "--timeout=3600"],
     "environment": {"WALKTHROUGH_HUB_STATE": str(STATE)}},
]
c.JupyterHub.load_roles = [
    {"name": "class-bench", "services": ["class-bench"],
     "scopes": ["admin:users", "admin:servers", "access:servers", "tokens"]},
    {"name": "idle-culler", "services": ["idle-culler"],
     "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]},
]
