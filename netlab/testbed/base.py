"""The testbed contract shared by every backend (see docs/testbed-design.md).

A testbed turns a :class:`~netlab.topology.Topology` into hosts that can be
reached over SSH and links whose rates are shaped. The controller, the cluster
runner and the tests only talk to this interface, so the emulated backend
(network namespaces) and a physical lab are interchangeable.
"""

from __future__ import annotations

import socket
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # kept out of the import path: the guardian imports this package and must start fast
    import pandas as pd

    from ..topology import Topology


class TestbedError(RuntimeError):
    """Something the testbed tried failed; the message names what and where."""

    __test__ = False  # not a pytest test class despite the name


@dataclass(frozen=True)
class TestbedHost:
    """One host as the controller sees it: where to SSH to and what the ranks bind to."""

    __test__ = False

    name: str          # topology host name, e.g. "h1"
    index: int         # topology host index (0-based, as in Topology.hosts)
    netns: str | None  # namespace the host lives in (None on a physical lab)
    data_addr: str     # data-plane IPv4 (MASTER_ADDR for ranks)
    ifname: str        # data-plane interface (GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME)
    ssh_addr: str
    ssh_port: int
    user: str
    gpus: int
    python: str        # interpreter on the host that runs the agent
    workdir: str       # where the agent is installed and keeps its state


class Testbed(ABC):
    """A running set of hosts built from a topology; a context manager (enter = up, exit = down)."""

    __test__ = False

    topology: Topology
    hosts: list[TestbedHost]
    rate_scale: float
    known_hosts: Path | None
    client_key: Path | None

    @abstractmethod
    def up(self) -> "Testbed":
        """Create everything; on failure undo what was created and raise TestbedError."""

    @abstractmethod
    def down(self) -> None:
        """Remove everything that up() created; idempotent."""

    @abstractmethod
    def open_socket(self, host: TestbedHost) -> socket.socket:
        """A TCP socket connected to the host's sshd, opened where the controller may open it."""

    @abstractmethod
    def set_link_rate(self, src: str, dst: str, rate_mbit: float) -> None:
        """Shape one directed topology link (src -> dst) to rate_mbit."""

    @abstractmethod
    def link_rates(self) -> pd.DataFrame:
        """One row per directed link: link, src, dst, tier, rate_gbps (topology), rate_mbit (shaped)."""

    @abstractmethod
    def link_stats(self) -> pd.DataFrame:
        """One row per shaped link: bytes, packets, drops, overlimits, backlog."""

    @abstractmethod
    def spawn(self, host: TestbedHost, argv: list[str], **popen_kw) -> subprocess.Popen:
        """Run a process on the host; it is recorded and killed on down()."""

    @abstractmethod
    def info(self) -> dict:
        """A JSON-able description (ids, rates, hosts, links) for experiment records."""

    def allocate(self, job: int, hosts, allocation, flows=None):
        """Enforce a job's :class:`~netlab.sched.NetAllocation` on the links it crosses (per-job classes,
        classifiers, routes); a backend that cannot refuses here, before anything is touched."""
        raise TestbedError(f"the {type(self).__name__} backend cannot enforce network allocations (job {job}); "
                           "the netns and routed backends can")

    def release(self, job: int) -> None:
        """Remove what :meth:`allocate` made for ``job`` (nothing when it made nothing)."""

    def host(self, name: str) -> TestbedHost:
        """The host called ``name``; the error lists the known names."""
        for h in self.hosts:
            if h.name == name:
                return h
        raise TestbedError(f"unknown testbed host {name!r}; hosts: {', '.join(h.name for h in self.hosts)}")

    def __enter__(self) -> "Testbed":
        return self.up()

    def __exit__(self, *exc) -> None:
        self.down()
