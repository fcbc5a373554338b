"""Connecting to Ray, the one place clirkit imports it.

Facts the helpers follow: Ray needs Python >= 3.10 (hence the marker on the ``ray`` extra); a local
cluster is started without its dashboard; Ray workers get ``OMP_NUM_THREADS=1`` but no
``RAYON_NUM_THREADS``, so every task and actor is given its thread count explicitly; on a small
machine whole-CPU requests for several long-lived actors starve each other, so shard actors ask
for a fraction of a CPU; an actor can be restarted only if its constructor needs nothing but
arguments, so shard actors open their index by path."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Union

#: How a caller names a cluster: an address (``"auto"``, ``"ray://head:10001"``, ``"10.0.0.1:6379"``),
#: True for Ray's default (``RAY_ADDRESS`` or a new local cluster), or None/False for no Ray at all.
RayAddress = Union[str, bool, None]


def require_ray() -> ModuleType:
    """The ``ray`` module, or an ImportError saying how to get it."""
    try:
        import ray
    except ImportError as e:
        raise ImportError(
            "this needs Ray: pip install 'clirkit[ray]' (Ray supports Python 3.10 and later)"
        ) from e
    return ray


@contextmanager
def connected(address: RayAddress = True, *, num_cpus: int | None = None) -> Iterator[ModuleType]:
    """Use the Ray cluster already initialized in this process, else connect to ``address``
    (True: Ray's default, which starts a local cluster of ``num_cpus`` CPUs when none runs); a
    connection opened here is closed on exit."""
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    if isinstance(address, str):
        ray.init(address=address, log_to_driver=False)
    elif os.environ.get("RAY_ADDRESS"):
        # Ray connects to it; a running cluster takes no start options.
        ray.init(log_to_driver=False)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def cluster_cpus(ray: ModuleType) -> float:
    """The CPUs the connected cluster has in all."""
    return float(ray.cluster_resources().get("CPU", 1.0))


def actor_cpus(ray: ModuleType, actors: int) -> float:
    """The CPU share each of ``actors`` long-lived actors asks for: at most one, and small enough
    that all of them fit the cluster at once (two decimals, Ray's resource precision is finer)."""
    share = cluster_cpus(ray) / max(actors, 1)
    return max(0.01, min(1.0, math.floor(share * 100) / 100))


def task_threads(cpus: float) -> int:
    """The thread count a task or actor asking for ``cpus`` CPUs runs with (Ray sets none)."""
    return max(1, math.ceil(cpus))


def crash_if_marked(marker: str | None) -> None:
    """Fault injection for tests: the first process to claim ``marker`` (by deleting it) ends at
    once, as a worker on a machine that died would."""
    if marker is None:
        return
    try:
        os.remove(marker)
    except FileNotFoundError:
        return
    os._exit(1)
