"""A class on one JupyterHub: N simulated students at once, measured through the hub's REST API.

Starts the local hub of ``make hub`` (tools/hub, its own folder and free ports), and for N = 1, 2, 4, 8:
creates N students, starts their servers together, and in each student's kernel runs notebook 02's set-up,
a slider's worth of explorer updates (the shape explorer's batch slider, 10 positions) and notebook 07's
checkpoint load, all students at once. Reports time to a running server, time per explorer update
(median, max), each kernel's peak resident memory, and the failures. Stops the hub at the end.

    .venv/bin/python benchmarks/bench_class.py [--students 1 2 4 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import nbformat
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import websocket_connect

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "hub"))
import hub  # noqa: E402 (tools/hub/hub.py: start and stop by PID)

SETUP = nbformat.read(ROOT / "notebooks" / "02_qkv_multihead_split.ipynb", as_version=4)
SETUP_CODE = next(c.source for c in SETUP.cells if c.cell_type == "code").replace("%matplotlib inline", "")
EXPLORER_CODE = """
import json, time, resource
import walkthrough as wt
explorer = wt.widgets.shape_explorer()
moves = []
for batch in (8, 16, 24, 32, 40, 48, 56, 64, 72, 80):  # a slider's worth of positions
    start = time.perf_counter()
    explorer.control("batch").value = batch
    moves.append(time.perf_counter() - start)
start = time.perf_counter()
trainer = wt.load_checkpoint("../checkpoints/numerals.pt")
load = time.perf_counter() - start
print(json.dumps({"moves": moves, "load": load, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


class Student:
    def __init__(self, address: str, token: str, name: str):
        self.address, self.token, self.name = address, token, name
        self.http = AsyncHTTPClient()

    async def call(self, path: str, method: str = "GET", body: dict | None = None):
        response = await self.http.fetch(HTTPRequest(
            f"{self.address}{path}", method=method, headers={"Authorization": f"token {self.token}"},
            body=None if body is None and method == "GET" else json.dumps(body or {}), request_timeout=600,
            allow_nonstandard_methods=True))
        return json.loads(response.body) if response.body else None

    async def start_server(self) -> float:
        start = time.perf_counter()
        await self.call(f"/hub/api/users/{self.name}", "POST")
        await self.call(f"/hub/api/users/{self.name}/server", "POST")
        while not (await self.call(f"/hub/api/users/{self.name}"))["servers"].get("", {}).get("ready"):
            await asyncio.sleep(0.5)
        return time.perf_counter() - start

    async def run(self, code: str) -> str:
        """Run ``code`` in a fresh kernel of this student's server; return what it printed."""
        kernel = await self.call(f"/user/{self.name}/api/kernels", "POST", {"name": "python3"})
        url = f"{self.address.replace('http', 'ws')}/user/{self.name}/api/kernels/{kernel['id']}/channels"
        socket = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {self.token}"}))
        session, printed = uuid.uuid4().hex, []
        for part in code:
            msg_id = uuid.uuid4().hex
            socket.write_message(json.dumps({
                "header": {"msg_id": msg_id, "session": session, "username": self.name,
                           "msg_type": "execute_request", "version": "5.3"},
                "parent_header": {}, "metadata": {}, "channel": "shell",
                "content": {"code": part, "silent": False, "store_history": False, "user_expressions": {},
                            "allow_stdin": False, "stop_on_error": True}}))
            while True:
                message = json.loads(await socket.read_message())
                if message.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind, content = message["msg_type"], message["content"]
                if kind == "stream" and content["name"] == "stdout":
                    printed.append(content["text"])
                elif kind == "error":
                    raise RuntimeError(f"{self.name}: {content['ename']}: {content['evalue']}")
                elif kind == "status" and content["execution_state"] == "idle":
                    break
        socket.close()
        return "".join(printed)

    async def leave(self) -> None:
        await self.call(f"/hub/api/users/{self.name}/server", "DELETE")
        while (await self.call(f"/hub/api/users/{self.name}"))["servers"]:
            await asyncio.sleep(0.5)
        await self.call(f"/hub/api/users/{self.name}", "DELETE")


async def one_student(student: Student) -> dict:
    result = {"name": student.name}
    try:
        result["to_server"] = await student.start_server()
        out = await student.run(["import os; os.chdir('notebooks')", SETUP_CODE, EXPLORER_CODE])
        result |= json.loads(out.strip().splitlines()[-1])
    except Exception as err:  # a failure is a result here: counted and reported, the others carry on
        result["failure"] = f"{type(err).__name__}: {err}"
    return result


async def one_class(address: str, token: str, size: int) -> list[dict]:
    students = [Student(address, token, f"n{size}-student{i}") for i in range(size)]
    results = await asyncio.gather(*(one_student(s) for s in students))
    await asyncio.gather(*(s.leave() for s in students))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--students", type=int, nargs="+", default=[1, 2, 4, 8])
    args = parser.parse_args()
    state = Path(tempfile.mkdtemp(prefix="bench-hub-"))
    port = next(p for p in range(18900, 19900, 3) if all(hub.port_free(q) for q in (p, p + 1, p + 2)))
    pid, address = hub.start(state, port)
    token = (state / "api_token").read_text().strip()
    print(f"hub PID {pid} at {address}; {len(SETUP_CODE.splitlines())} lines of notebook 02's set-up per student")
    print("N | to a running server (s): median, max | explorer update (ms): median, max | checkpoint load (s) max "
          "| kernel peak (MB): median, max | failures")
    try:
        for size in args.students:
            results = asyncio.run(one_class(address, token, size))
            ok = [r for r in results if "failure" not in r]
            failures = [r["failure"] for r in results if "failure" in r]
            if ok:
                starts = [r["to_server"] for r in ok]
                moves = [m * 1000 for r in ok for m in r["moves"]]
                peaks = [r["peak"] / 1e6 for r in ok]
                print(f"{size} | {statistics.median(starts):.1f}, {max(starts):.1f} | {statistics.median(moves):.0f}, "
                      f"{max(moves):.0f} | {max(r['load'] for r in ok):.2f} | {statistics.median(peaks):.0f}, "
                      f"{max(peaks):.0f} | {len(failures)}", flush=True)
            else:
                print(f"{size} | all failed | | | | {len(failures)}", flush=True)
            for failure in failures:
                print(f"  failure: {failure}")
    finally:
        hub.stop(state)


if __name__ == "__main__":
    main()
