"""``ideal``: a non-blocking network, every job at its isolated speed; the bound every result is compared with."""

from __future__ import annotations

from .model import NETWORKS, Capabilities, NetSolution, NetworkModel


@NETWORKS.register("ideal")
class IdealNetwork(NetworkModel):
    """Non-blocking network: every job at its isolated speed."""

    name = "ideal"
    capabilities = Capabilities(contention=False)

    def solve(self, demands, capacity_gbps):
        iter_s = {d.job_id: d.iso_iter_s for d in demands}
        comm = {d.job_id: d.iso_iter_s - d.compute_s for d in demands}
        return NetSolution(iter_s, comm)
