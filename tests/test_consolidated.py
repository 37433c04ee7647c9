"""``consolidated``'s rule on counts of hosts per free-GPU value gives the placement the rule's plain statement gives
(a host-by-host transcription below, the oracle) on random fragmented clusters, racks not contiguous in host order."""

import numpy as np
import pytest

from netlab.policies.placement.consolidated import _best_fit, _consolidate, consolidate
from netlab.topology import load_topology


def oracle(free: np.ndarray, rack: np.ndarray, n_racks: int, n: int) -> list[int]:
    """GPUs per host, the rule as the module docstring states it, scanning hosts."""
    counts = [0] * len(free)
    if free.sum() < n:
        return counts
    by_free = sorted(range(len(free)), key=lambda h: (-free[h], h))

    def fewest(hosts):  # hosts needed, fullest first
        acc = k = 0
        for h in hosts:
            if acc >= n:
                break
            acc, k = acc + free[h], k + 1
        return k

    def take(hosts):
        left = n
        for h in hosts:
            if left <= 0:
                break
            counts[h] = min(free[h], left)
            left -= counts[h]
        return counts

    k_global = fewest(by_free)
    for r in range(n_racks):  # one rack with k_global hosts
        mine = [h for h in by_free if rack[h] == r]
        if sum(free[h] for h in mine) >= n and fewest(mine) <= k_global:
            return take(mine)
    chosen: list[int] = []  # racks added greedily, most GPUs on k_global hosts first
    while True:
        best, best_acc = -1, -1
        for r in range(n_racks):
            if r in chosen or not any(free[h] for h in range(len(free)) if rack[h] == r):
                continue
            acc = sum(free[h] for h in [h for h in by_free if rack[h] in chosen or rack[h] == r][:k_global])
            if acc > best_acc:
                best, best_acc = r, acc
        chosen.append(best)
        if best_acc >= n:
            break
    return take(sorted((h for h in range(len(free)) if rack[h] in chosen),
                       key=lambda h: (-free[h], chosen.index(rack[h]), h)))


def test_counts_rule_matches_the_oracle_on_fragmented_clusters():
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(300):
        racks, per_rack, g = int(rng.integers(1, 7)), int(rng.integers(1, 6)), int(rng.choice([1, 2, 4, 8, 16]))
        rack = np.repeat(np.arange(racks), per_rack)
        rng.shuffle(rack)  # racks need not be contiguous in host order
        free = np.minimum(rng.integers(0, g + 1, size=len(rack)) * int(rng.choice([1, 2])), g).astype(np.int64)
        for n in range(2, int(free.sum()) + 2):
            got = _consolidate(free, rack.astype(np.int64), racks, n)
            assert got.tolist() == oracle(free, rack, racks, n), (free.tolist(), rack.tolist(), n)
            checked += 1
    assert checked > 3000


def test_best_fit_is_the_fewest_free_that_fits_lowest_index_on_ties():
    rng = np.random.default_rng(2)
    for _ in range(2000):
        free = rng.integers(0, 9, size=int(rng.integers(1, 12))).astype(np.int64)
        n = int(rng.integers(1, 9))
        fits = [h for h in range(len(free)) if free[h] >= n]
        want = min(fits, key=lambda h: (free[h], h)) if fits else -1
        assert _best_fit(free, n) == want, (free.tolist(), n)


@pytest.mark.parametrize("spec, n", [("clos3,gpus=4096", 256), ("rail,gpus=4096", 512), ("clos3,gpus=131072", 512)])
def test_a_large_job_on_a_fragmented_fabric(spec, n):
    topo = load_topology(spec)
    rng = np.random.default_rng(0)
    free = topo.host_gpus.copy()
    used = rng.choice(topo.n_hosts, topo.n_hosts // 2, replace=False)
    free[used] = rng.integers(0, 8, size=len(used))  # half the hosts partly used
    p, _ = consolidate(free, topo, n)
    assert sum(p.gpus) == n and len(p.hosts) == n // 8  # the fewest hosts: wholly free ones
    assert all(free[h] == 8 for h in p.hosts)
    if topo.n_hosts <= 512:
        counts = oracle(free, topo.host_rack, topo.n_racks, n)
        assert [h for h, c in enumerate(counts) if c] == list(p.hosts)


def test_one_host_placements_come_from_the_memo_and_equal_fresh_ones():
    """Hosts 0-3 with 8, 3, 2, 8 free: a 2-GPU job best-fits host 2 (2 free, the tightest), a 3-GPU job host 1;
    asked again, the policy hands out the very same Placement objects; a 9-GPU job (two hosts) does not enter the
    memo; another topology starts a memo of its own."""
    from netlab.policies.placement.consolidated import Consolidated
    from netlab.sched import ClusterView, JobState, Placement
    from netlab.workload.job import Job

    topo = load_topology("leafspine,racks=1,hosts_per_rack=4,gpus_per_host=8")
    free = np.array([8, 3, 2, 8], dtype=np.int64)
    view = ClusterView(topo, free, {}, 0.0)
    job = lambda g: JobState(Job(g, 0.0, g, "resnet50", 10.0), 1.0)  # noqa: E731
    policy = Consolidated()
    two, three = policy.place(job(2), view), policy.place(job(3), view)
    assert (two, three) == (Placement((2,), (2,)), Placement((1,), (3,)))
    assert policy.place(job(2), view) is two and policy.place(job(3), view) is three
    assert policy.place(job(9), view) == Placement((0, 3), (8, 1))
    assert set(policy._index[2]) == {(2, 2), (1, 3)}
    other = load_topology("leafspine,racks=1,hosts_per_rack=4,gpus_per_host=8")
    again = policy.place(job(2), ClusterView(other, free, {}, 0.0))
    assert again == two and again is not two
