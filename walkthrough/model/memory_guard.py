"""The memory guard: refuse, before allocating, a model that this process cannot build.

One function, ``check_fits_in_memory(cfg)``, called by the models' constructors (``Transformer``, ``GPT``) before
they allocate anything: the peak of building (``build_peak_bytes``, arithmetic on the config) against what this
process may still allocate (``memory_headroom``: its cgroup's limit, RLIMIT_AS, the machine's available memory).
It prevents the classroom failure of a mistyped size (``max_len=10**9``, a huge d_model or vocabulary): without
it the allocator fails with a raw RuntimeError, or a 2 GB hub kernel is killed. The probe reads a few small files
(well under a millisecond, a small share of building even the smallest model); on the meta device it is skipped.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from ..i18n import _
from .config import GPTConfig, ModelConfig, parameter_count

try:
    import resource  # Unix: the process's own limits
except ImportError:  # Windows has no RLIMIT_AS
    resource = None


def build_peak_bytes(cfg: ModelConfig | GPTConfig) -> int:
    """Peak memory of building the model in float32: weights, position tables, and one table more.

    A sinusoidal table [max_len, D] is filled from two temporaries of half its size (the angles, then their
    sines or cosines), so while the last table is built the process holds everything plus one table. RoPE
    builds no table; a learned table is a parameter. Tested against the peaks measured when building
    (tests/test_bad_input.py).
    """
    built = 0 if cfg.positions in ("rope", "learned") else 1  # learned tables are parameters, counted there
    tables = built * (1 if isinstance(cfg, GPTConfig) else 2)  # the encoder-decoder's two embeddings each hold one
    table = cfg.max_len * cfg.d_model
    return 4 * (parameter_count(cfg) + tables * table + (table if tables else 0))


def _read_number(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):  # absent, "max" (no limit), unreadable
        return None


def _cgroup_limits(cgroup: Path, membership: Path) -> list[tuple[int, str]]:
    """(bytes left, description) for every memory limit on this process's cgroup and its ancestors, v2 and v1.

    ``membership`` (/proc/self/cgroup) names the process's cgroup ("0::/a/b" in v2, "4:memory:/a/b" in v1);
    every level up to the root may limit it. In a container the root is usually the container's own.
    """
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        lines = []
    places = [(cgroup, "memory.max", "memory.current"), (cgroup / "memory", "memory.limit_in_bytes",
                                                          "memory.usage_in_bytes")]
    for hierarchy, controllers, own in (line.split(":", 2) for line in lines if line.count(":") >= 2):
        if hierarchy == "0" or "memory" in controllers.split(","):
            base, limit_file, usage_file = places[0] if hierarchy == "0" else places[1]
            folder = base / own.lstrip("/")
            while folder != base and base in folder.parents:
                places.append((folder, limit_file, usage_file))
                folder = folder.parent
    found = []
    for folder, limit_file, usage_file in places:
        limit, usage = _read_number(folder / limit_file), _read_number(folder / usage_file)
        if limit is not None and usage is not None and limit < 2**60:  # v1 writes "no limit" as about 2**63
            found.append((limit - usage, f"the container's memory limit ({limit / 2**30:.1f} GiB, cgroup)"))
    return found


def memory_headroom(cgroup: Path = Path("/sys/fs/cgroup"),
                    membership: Path = Path("/proc/self/cgroup")) -> tuple[int, str] | None:
    """Bytes this process may still allocate and the limit that says so, the tightest of: its cgroup's memory
    limit (a container's, a hub's; v2 or v1, any level), its address-space limit (RLIMIT_AS), the machine's
    available memory. None where no limit can be read."""
    found = _cgroup_limits(cgroup, membership)
    if resource is not None:
        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            pages = _read_number(Path("/proc/self/statm")) or 0  # the address space in use, in pages
            found.append((soft - pages * os.sysconf("SC_PAGE_SIZE"),
                          f"this process's address-space limit (RLIMIT_AS, {soft / 2**30:.1f} GiB)"))
    try:
        meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        found.append((int(meminfo["MemAvailable"].split()[0]) * 1024, "the memory this machine has available"))
    except (OSError, KeyError, ValueError):  # not Linux: all of the machine's memory
        try:
            found.append((os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this machine's memory"))
        except (ValueError, OSError, AttributeError):
            pass
    return min(found) if found else None


def check_fits_in_memory(cfg: ModelConfig | GPTConfig, what: str | None = None) -> None:
    """Refuse, before allocating anything, to build a model whose peak while building (``build_peak_bytes``)
    exceeds what this process may still allocate (``memory_headroom``). ``what`` names it in the message
    (default "this Transformer" or "this GPT"); on the meta device nothing is allocated: any size passes."""
    if torch.empty(0).device.type == "meta":  # inside ``with torch.device("meta"):``
        return
    what = what or ("this GPT" if isinstance(cfg, GPTConfig) else "this Transformer")
    headroom = memory_headroom()
    needed = build_peak_bytes(cfg)
    if headroom is not None and needed > headroom[0]:
        room, limit = headroom
        raise ValueError(_("{what} would need about {needed_2_30:.1f} GiB while it is built (weights, position "
                         "tables and the temporaries that fill them), but {limit} leaves this process "
                         "{max_room_0_2_30:.1f} GiB: lower max_len, the vocabulary or the sizes (to see "
                         "shapes at any size, trace on the meta device: wt.trace_shapes)").format(
                             what=what, needed_2_30=needed / 2 ** 30, limit=limit,
                             max_room_0_2_30=max(room, 0) / 2 ** 30))


def check_room(needed: int, what: str, fix: str) -> None:
    """Refuse, before allocating, work that needs ``needed`` bytes more than this process may still allocate: the
    guard of every size a student chooses beyond building a model (training it, decoding a batch). ``what`` names
    the work, ``fix`` what to lower; on the meta device nothing is allocated."""
    headroom = memory_headroom()
    if torch.empty(0).device.type != "meta" and headroom is not None and needed > headroom[0]:
        room, limit = headroom
        raise ValueError(_("{what} would need about {needed:.1f} GiB, but {limit} leaves this process {room:.1f} GiB: "
                           "{fix}").format(what=what, needed=needed / 2**30, limit=limit, room=max(room, 0) / 2**30,
                                           fix=fix))
