"""Running jobs' traffic per link, the input every CASSINI decision starts from."""

from __future__ import annotations

import numpy as np


class LinkIndex:
    """link -> jobs on it (and their weights there), job -> links; from the running jobs' demands.

    Built with one sort over all (link, job) pairs; reused while the set of
    running multi-host jobs (and their demand objects) is unchanged.
    """

    def __init__(self, running):
        jobs = [js for js in running.values() if js.demand is not None]
        self.key = key_of(running)
        self.job_links: dict[int, list[int]] = {js.job_id: js.demand.links.tolist() for js in jobs}
        self.link_jobs: dict[int, tuple[int, ...]] = {}
        self.link_weights: dict[int, np.ndarray] = {}
        self._sig: dict[int, tuple] = {}
        if not jobs:
            return
        links = np.concatenate([js.demand.links for js in jobs])
        weights = np.concatenate([js.demand.weights for js in jobs])
        owners = np.repeat([js.job_id for js in jobs], [len(js.demand.links) for js in jobs])
        order = np.argsort(links, kind="stable")
        uniq, starts = np.unique(links[order], return_index=True)
        own, w = owners[order].tolist(), weights[order]
        bounds = starts.tolist() + [len(own)]
        for l, a, b in zip(uniq.tolist(), bounds[:-1], bounds[1:]):
            self.link_jobs[l] = tuple(own[a:b])
            self.link_weights[l] = w[a:b]

    def signature(self, link: int) -> tuple:
        """Jobs and weights on ``link``: links with equal signatures (and capacity) score equally."""
        sig = self._sig.get(link)
        if sig is None:
            sig = self._sig[link] = (self.link_jobs.get(link, ()), tuple(self.link_weights[link].round(12).tolist())
                                     if link in self.link_weights else ())
        return sig


def key_of(running) -> tuple:
    """Identity of the running multi-host jobs' demands (a restart builds a new demand object)."""
    return tuple((jid, id(js.demand)) for jid, js in running.items() if js.demand is not None)
