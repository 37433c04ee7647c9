"""Equal-cost routing from per-destination tables, the way switches do it.

One idea in one module although it is over 500 lines: the tables, the walk and the checks that keep them equal to
the graph rule belong together.

The rule is the one :mod:`netlab.topology.model` documents: a flow between two
hosts uses the hop-shortest paths of the cable graph, listed in the order of
their node names (the order ``sorted(networkx.all_shortest_paths(...))``
gives); ``hash`` ECMP takes path ``crc32 % P`` of that list, ``split`` spreads
the flow evenly over all ``P``. Enumerating paths per host pair with a graph
search costs milliseconds per pair at 16k GPUs; here nothing is enumerated:

* A destination is the set of switches its host is cabled to (its *anchors*:
  one ToR, or the rail leaves of a rail-optimised host; every host of a rack or
  scalable unit shares one). One multi-source BFS from the anchors gives each
  switch its hop distance to them and its number of shortest paths to them:
  the ECMP next-hop table (the next hops of ``u`` are its neighbours one hop
  closer), built once per destination and kept.
* The ``i``-th path in name order is a walk down that table: at each switch,
  next hops in name order, skipping whole blocks of ``count`` paths until the
  block holding ``i``. Split weights come from the same counts: a link carries
  (paths reaching its tail) x (paths from its head) of the ``P``.

Tables are over switches only: a single-homed host can never be a transit node
of a simple path. A host cabled to several switches could be one (a YAML
fabric may wire it so); before a table is used it is checked that every such
host's switches are within one hop of each other's distance to the
destination, which proves no shortest path to it passes through a host (any
detour through one is then strictly longer). A destination that fails the
check, and every destination of a topology with host-to-host cables, is routed
on tables over the whole graph (hosts as nodes) instead: the same walk, exact
in every case. Both give exactly networkx's answer; the tests compare them on
every builder.
"""

from __future__ import annotations

import numpy as np
from ..jit import njit

#: path counts above this are refused (they would overflow int64 in the split weights); no fabric comes close
MAX_PATHS = 2**62


def _csr(n: int, a: np.ndarray, b: np.ndarray, link_ab: np.ndarray, link_ba: np.ndarray):
    """Adjacency of ``n`` nodes from undirected edges (a[i], b[i]) as CSR, neighbours in ascending id order,
    with the directed link id of each entry."""
    src = np.concatenate([a, b])
    dst = np.concatenate([b, a])
    link = np.concatenate([link_ab, link_ba])
    order = np.lexsort((dst, src))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    return indptr, dst[order].astype(np.int64), link[order].astype(np.int64)


@njit(cache=True)
def _bfs(indptr, indices, anchors, dist, cnt):  # pragma: no cover (compiled)
    """Multi-source BFS from ``anchors``: hop distance to the nearest anchor and the number of shortest paths to
    the anchors, for every node (-1 and 0 where unreachable). False if a count would pass MAX_PATHS."""
    n = dist.shape[0]
    for v in range(n):
        dist[v] = -1
        cnt[v] = 0
    queue = np.empty(n, dtype=np.int64)
    tail = 0
    for a in anchors:
        dist[a] = 0
        cnt[a] = 1
        queue[tail] = a
        tail += 1
    head = 0
    while head < tail:
        u = queue[head]
        head += 1
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            if dist[v] < 0:
                dist[v] = dist[u] + 1
                queue[tail] = v
                tail += 1
            if dist[v] == dist[u] + 1:
                cnt[v] += cnt[u]
                if cnt[v] > 4611686018427387904:  # MAX_PATHS
                    return False
    return True


@njit(cache=True)
def _no_host_transit(dist, host_ptr, host_nbr, multi):  # pragma: no cover (compiled)
    """True if, for every host in ``multi``, the distances of its switches differ by at most one (all reachable
    or none): then no shortest path toward the table's anchors passes through a host (module docstring)."""
    for h in multi:
        lo, hi, unreachable = -1, -1, False
        for k in range(host_ptr[h], host_ptr[h + 1]):
            d = dist[host_nbr[k]]
            if d < 0:
                unreachable = True
            else:
                lo = d if lo < 0 or d < lo else lo
                hi = d if d > hi else hi
        if (unreachable and hi >= 0) or hi - lo > 1:
            return False
    return True


@njit(cache=True)
def _first_hops(dist, cnt, nbr, lo, hi):  # pragma: no cover (compiled)
    """(distance of the nearest first hop among nbr[lo:hi], number of paths through those)."""
    best = -1
    for k in range(lo, hi):
        d = dist[nbr[k]]
        if d >= 0 and (best < 0 or d < best):
            best = d
    total = 0
    if best >= 0:
        for k in range(lo, hi):
            if dist[nbr[k]] == best:
                total += cnt[nbr[k]]
    return best, total


def _crc_table() -> np.ndarray:
    """The CRC-32 (IEEE, as zlib) byte table."""
    table = np.zeros(256, dtype=np.int64)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        table[i] = c
    return table


CRC_TABLE = _crc_table()


@njit(cache=True)
def _crc_decimal(crc, value, table):  # pragma: no cover (compiled)
    """``crc`` (pre-inverted) fed the decimal text of ``value``."""
    if value < 0:
        crc = table[(crc ^ 45) & 0xFF] ^ (crc >> 8)  # "-"
        value = -value
    p = 1
    while p <= value // 10:
        p *= 10
    while p > 0:
        crc = table[(crc ^ (48 + (value // p) % 10)) & 0xFF] ^ (crc >> 8)
        p //= 10
    return crc


@njit(cache=True)
def flow_hashes(src, dst, key0, table):  # pragma: no cover (compiled)
    """``zlib.crc32(f"{src[f]}|{dst[f]}|{key0 + f}".encode())`` for every flow f, without making the strings."""
    out = np.empty(src.shape[0], dtype=np.int64)
    for f in range(src.shape[0]):
        crc = 0xFFFFFFFF
        crc = _crc_decimal(crc, src[f], table)
        crc = table[(crc ^ 124) & 0xFF] ^ (crc >> 8)  # "|"
        crc = _crc_decimal(crc, dst[f], table)
        crc = table[(crc ^ 124) & 0xFF] ^ (crc >> 8)
        crc = _crc_decimal(crc, key0 + f, table)
        out[f] = crc ^ 0xFFFFFFFF
    return out


@njit(cache=True)
def _choose(nodes, links, lo, hi, want, d, c, i):  # pragma: no cover (compiled)
    """The next hop of path ``i``: among nodes[lo:hi] (name order) those at distance ``want`` each head a block of
    c[node] paths; the one whose block holds ``i``, the link to it, and ``i`` within that block."""
    for k in range(lo, hi):
        x = nodes[k]
        if d[x] == want:
            if i < c[x]:
                return x, links[k], i
            i -= c[x]
    return -1, -1, i


@njit(cache=True)
def _walk_one(indptr, indices, edge_link, d, c, a, b, i, best, host_ptr, host_nbr, host_up, host_down, final, out,
              pos):  # pragma: no cover (compiled)
    """Write the links of path ``i`` (node-name order) from host a to host b at ``out[pos:]``; the next position.

    ``final``: the table ends at b's anchors and one more hop (anchor -> b) closes the path; otherwise the table
    ends at the node b itself.
    """
    u, out[pos], i = _choose(host_nbr, host_up, host_ptr[a], host_ptr[a + 1], best, d, c, i)
    pos += 1
    while d[u] > 0:
        u, out[pos], i = _choose(indices, edge_link, indptr[u], indptr[u + 1], d[u] - 1, d, c, i)
        pos += 1
    if final:
        for k in range(host_ptr[b], host_ptr[b + 1]):
            if host_nbr[k] == u:
                out[pos] = host_down[k]
                pos += 1
                break
    return pos


@njit(cache=True)
def _walk(indptr, indices, edge_link, dist, cnt, rows, src, dst, index, host_ptr, host_nbr, host_up, host_down,
          final):  # pragma: no cover (compiled)
    """Links of path ``index[f]`` of each flow, concatenated, each flow's offset, and the first flow without a
    path (-1 if none)."""
    n = src.shape[0]
    ptr = np.zeros(n + 1, dtype=np.int64)
    best = np.empty(n, dtype=np.int64)
    for f in range(n):
        a = src[f]
        best[f], total = _first_hops(dist[rows[f]], cnt[rows[f]], host_nbr, host_ptr[a], host_ptr[a + 1])
        if total == 0:
            return np.empty(0, dtype=np.int64), ptr, f
        ptr[f + 1] = ptr[f] + best[f] + 1 + (1 if final else 0)
    out = np.empty(ptr[n], dtype=np.int64)
    for f in range(n):
        _walk_one(indptr, indices, edge_link, dist[rows[f]], cnt[rows[f]], src[f], dst[f], index[f], best[f],
                  host_ptr, host_nbr, host_up, host_down, final, out, ptr[f])
    return out, ptr, -1


#: ``_hash_route``'s answer when a destination is not (yet) routed on the tables it was given
NOT_ON_TABLES = -2


@njit(cache=True)
def _hash_route(indptr, indices, edge_link, dist, cnt, mode, want, row_of, flows, key0, table, flow_weights,
                host_ptr, host_nbr, host_up, host_down, final, scratch):  # pragma: no cover (compiled)
    """The ``hash`` rule for every flow (flow f keyed ``key0 + f``) and the sum over the flows: sorted link ids,
    the flows (times ``flow_weights[f]``, if given) on each, added in flow order, and the first flow without a
    path (-1 if none). ``scratch`` (one float per link, all 0) is left all 0. Destination host ``b`` is routed on
    table row ``row_of[b]``; if one destination's ``mode[b]`` is not ``want`` (its table not built yet, or on the
    other kind of tables) nothing is routed and the third value is ``NOT_ON_TABLES``."""
    n = flows.shape[0]
    rows = np.empty(n, dtype=np.int64)
    for f in range(n):
        b = flows[f, 1]
        if mode[b] != want:
            return np.empty(0, dtype=np.int64), np.empty(0), NOT_ON_TABLES
        rows[f] = row_of[b]
    hashes = flow_hashes(flows[:, 0], flows[:, 1], key0, table)
    best = np.empty(n, dtype=np.int64)
    pick = np.empty(n, dtype=np.int64)
    size = 0
    for f in range(n):
        a = flows[f, 0]
        best[f], total = _first_hops(dist[rows[f]], cnt[rows[f]], host_nbr, host_ptr[a], host_ptr[a + 1])
        if total == 0:
            return np.empty(0, dtype=np.int64), np.empty(0), f
        pick[f] = hashes[f] % total if total > 1 else 0
        size += best[f] + 1 + (1 if final else 0)
    links = np.empty(size, dtype=np.int64)
    pos = 0
    for f in range(n):
        end = _walk_one(indptr, indices, edge_link, dist[rows[f]], cnt[rows[f]], flows[f, 0], flows[f, 1], pick[f],
                        best[f], host_ptr, host_nbr, host_up, host_down, final, links, pos)
        w = flow_weights[f] if flow_weights.shape[0] else 1.0
        for k in range(pos, end):
            scratch[links[k]] += w
        pos = end
    return _collect(links, scratch) + (-1,)


@njit(cache=True)
def _count(dist, cnt, rows, src, host_ptr, host_nbr):  # pragma: no cover (compiled)
    """Number of equal-cost paths of each flow (0: no path)."""
    out = np.empty(src.shape[0], dtype=np.int64)
    for f in range(src.shape[0]):
        a = src[f]
        best, total = _first_hops(dist[rows[f]], cnt[rows[f]], host_nbr, host_ptr[a], host_ptr[a + 1])
        out[f] = total
    return out


@njit(cache=True)
def _split(indptr, indices, edge_link, d, c, a, b, host_ptr, host_nbr, host_up, host_down,
           final):  # pragma: no cover (compiled)
    """Every link on a shortest path a -> b and the number of those paths through it (links level by level),
    and the number of paths."""
    best, total = _first_hops(d, c, host_nbr, host_ptr[a], host_ptr[a + 1])
    fwd = np.zeros(d.shape[0], dtype=np.int64)  # paths from a reaching each node
    links = [np.int64(0)] * 0
    paths = [np.int64(0)] * 0
    level = [np.int64(0)] * 0
    for k in range(host_ptr[a], host_ptr[a + 1]):
        x = host_nbr[k]
        if d[x] == best:
            links.append(host_up[k])
            paths.append(c[x])
            fwd[x] = 1
            level.append(x)
    depth = best
    while depth > 0:
        nxt = [np.int64(0)] * 0
        for u in level:
            for e in range(indptr[u], indptr[u + 1]):
                v = indices[e]
                if d[v] == depth - 1:
                    links.append(edge_link[e])
                    paths.append(fwd[u] * c[v])
                    if fwd[v] == 0:
                        nxt.append(v)
                    fwd[v] += fwd[u]
        level = nxt
        depth -= 1
    if final:
        for k in range(host_ptr[b], host_ptr[b + 1]):
            y = host_nbr[k]
            if fwd[y] > 0 and d[y] == 0:
                links.append(host_down[k])
                paths.append(fwd[y])
    return np.array(links, dtype=np.int64), np.array(paths, dtype=np.int64), total


@njit(cache=True)
def shares(paths, total):  # pragma: no cover (compiled)
    """``k`` paths of ``total`` as a weight: ``1/total`` added ``k`` times in sequence (the float a sum over the
    enumerated paths gives, to the last bit)."""
    share = 1.0 / total
    out = np.empty(paths.shape[0])
    for i in range(paths.shape[0]):
        acc = 0.0
        for _ in range(paths[i]):
            acc += share
        out[i] = acc
    return out


@njit(cache=True)
def _collect(links, scratch):  # pragma: no cover (compiled)
    """Sorted distinct ``links`` and their sums in ``scratch`` (zero sums dropped, as np.flatnonzero would);
    ``scratch`` is reset to 0 there.

    Why taken in first-met order, then sorted: a job's links repeat (every flow of a host crosses its uplink),
    so about a third of ``links`` are distinct, and sorting only those cost less than ``np.unique`` of all of
    them (a sixth of a large job's route). A link's sum is read once, when first met, and zeroed then, so a
    repeat finds 0 and is not taken again."""
    ids = np.empty(links.shape[0], dtype=np.int64)
    sums = np.empty(links.shape[0])
    keep = 0
    for l in links:
        s = scratch[l]
        if s != 0.0:
            ids[keep], sums[keep] = l, s
            scratch[l] = 0.0
            keep += 1
    order = np.argsort(ids[:keep])
    return ids[order], sums[order]


@njit(cache=True)
def accumulate(links, weights, scratch):  # pragma: no cover (compiled)
    """Sorted distinct ``links`` and the sum of ``weights`` on each, added in input order (np.bincount's sums),
    zero sums dropped; ``scratch`` (one float per link, all 0) is left all 0."""
    for i in range(links.shape[0]):
        scratch[links[i]] += weights[i]
    return _collect(links, scratch)


class _Tables:
    """One routing graph (nodes in name order), the hosts' first hops into it, and per-destination tables.

    ``final``: destinations are anchor sets (a host's switches), paths end with the anchor -> host link;
    otherwise destinations are the host nodes themselves (the whole-graph tables).
    """

    def __init__(self, n_nodes, indptr, indices, edge_link, host_ptr, host_nbr, host_up, host_down, final):
        self.n_nodes, self.indptr, self.indices, self.edge_link = n_nodes, indptr, indices, edge_link
        self.host_ptr, self.host_nbr, self.host_up, self.host_down = host_ptr, host_nbr, host_up, host_down
        self.final = final
        self.dist = np.empty((0, n_nodes), dtype=np.int32)
        self.cnt = np.empty((0, n_nodes), dtype=np.int64)
        self.rows: dict[tuple, int] = {}

    def table(self, key: tuple, anchors: np.ndarray) -> int:
        """Row of the table for destination ``key`` (built from ``anchors`` on first use)."""
        row = self.rows.get(key)
        if row is not None:
            return row
        row = len(self.rows)
        if row == len(self.dist):  # grow by doubling: amortised O(1) per table
            grow = max(4, row)
            self.dist = np.concatenate([self.dist, np.empty((grow, self.n_nodes), dtype=np.int32)])
            self.cnt = np.concatenate([self.cnt, np.empty((grow, self.n_nodes), dtype=np.int64)])
        if not _bfs(self.indptr, self.indices, anchors, self.dist[row], self.cnt[row]):
            raise OverflowError(f"more than {MAX_PATHS} equal-cost paths")
        self.rows[key] = row
        return row

    def nbytes(self) -> int:
        return self.dist.nbytes + self.cnt.nbytes


class Router:
    """Equal-cost paths between hosts of one topology, from tables (module docstring).

    Built from the topology's cables; tables appear as destinations are first asked for.
    """

    def __init__(self, topo):
        self.topo = topo
        n_hosts = topo.n_hosts
        switch_names = sorted(topo.switches)
        S = len(switch_names)
        node = {s: i for i, s in enumerate(switch_names)}  # switches 0..S-1 in name order, then hosts
        node.update((h.name, S + i) for i, h in enumerate(topo.hosts))
        a = np.fromiter(map(node.__getitem__, [c[0] for c in topo.cables]), dtype=np.int64, count=len(topo.cables))
        b = np.fromiter(map(node.__getitem__, [c[1] for c in topo.cables]), dtype=np.int64, count=len(topo.cables))
        ab = np.arange(len(a), dtype=np.int64) * 2  # cable i is links 2i (a -> b) and 2i + 1 (b -> a)
        ba = ab + 1
        sw = (a < S) & (b < S)
        a_is_host = (a >= S) & (b < S)
        b_is_host = (b >= S) & (a < S)
        self._host_cables = bool(np.any((a >= S) & (b >= S)))
        h_host = np.concatenate([a[a_is_host], b[b_is_host]]) - S
        h_sw = np.concatenate([b[a_is_host], a[b_is_host]])
        h_up = np.concatenate([ab[a_is_host], ba[b_is_host]])
        h_down = np.concatenate([ba[a_is_host], ab[b_is_host]])
        a_sw, b_sw, l_ab, l_ba = a[sw], b[sw], ab[sw], ba[sw]
        self._whole: _Tables | None = None
        self._mode = np.zeros(n_hosts, dtype=np.int8)  # 0: not yet asked, 1: switch tables, 2: whole-graph tables
        self._row = np.full(n_hosts, -1, dtype=np.int64)
        self.scratch = np.zeros(topo.n_links)
        if self._host_cables:
            self._switches = None
            return
        indptr, indices, edge_link = _csr(S, a_sw, b_sw, l_ab, l_ba)
        order = np.lexsort((h_sw, h_host))
        host_ptr = np.zeros(n_hosts + 1, dtype=np.int64)
        np.cumsum(np.bincount(h_host, minlength=n_hosts), out=host_ptr[1:])
        self._switches = _Tables(S, indptr, indices, edge_link, host_ptr, h_sw[order], h_up[order], h_down[order],
                                 final=True)
        self._multi = np.flatnonzero(np.diff(host_ptr) > 1)  # hosts that could be transit nodes
        self._exact: dict[int, bool] = {}  # table row -> no shortest path toward it passes through a host

    # -- which tables route to a host -------------------------------------------------------------------------------
    def _whole_graph(self) -> _Tables:
        if self._whole is None:
            topo = self.topo
            names = [h.name for h in topo.hosts] + list(topo.switches)
            rank = {name: i for i, name in enumerate(sorted(names))}
            a = np.array([rank[c[0]] for c in topo.cables], dtype=np.int64)
            b = np.array([rank[c[1]] for c in topo.cables], dtype=np.int64)
            ab = np.arange(len(a), dtype=np.int64) * 2  # cable i is links 2i (a -> b) and 2i + 1 (b -> a)
            indptr, indices, edge_link = _csr(len(names), a, b, ab, ab + 1)
            node = np.array([rank[h.name] for h in topo.hosts], dtype=np.int64)
            # a host's first hops are its node's adjacency row
            lo, hi = indptr[node], indptr[node + 1]
            host_ptr = np.concatenate(([0], np.cumsum(hi - lo)))
            take = np.concatenate([np.arange(x, y) for x, y in zip(lo, hi)])
            self._whole = _Tables(len(names), indptr, indices, edge_link, host_ptr, indices[take], edge_link[take],
                                  np.zeros(len(take), dtype=np.int64), final=False)
            self._whole_node = node
        return self._whole

    def _prepare(self, dst: np.ndarray) -> None:
        """Make sure every destination host in ``dst`` has its table."""
        if self._mode[dst].all():
            return
        for b in np.unique(dst[self._mode[dst] == 0]).tolist():
            if self._switches is not None:
                t = self._switches
                anchors = t.host_nbr[t.host_ptr[b]:t.host_ptr[b + 1]]
                row = t.table(tuple(anchors.tolist()), anchors)
                exact = self._exact.get(row)
                if exact is None:
                    exact = self._exact[row] = _no_host_transit(t.dist[row], t.host_ptr, t.host_nbr, self._multi)
                if exact:
                    self._mode[b], self._row[b] = 1, row
                    continue
            t = self._whole_graph()
            self._mode[b], self._row[b] = 2, t.table((b,), self._whole_node[b:b + 1])

    def _tables(self, mode: int) -> _Tables:
        return self._switches if mode == 1 else self._whole

    # -- answers --------------------------------------------------------------------------------------------------
    def count(self, src, dst) -> np.ndarray:
        """Number of equal-cost paths of each flow src[f] -> dst[f] (host indices)."""
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        self._prepare(dst)
        out = np.empty(len(src), dtype=np.int64)
        for mode in (1, 2):
            sel = np.flatnonzero(self._mode[dst] == mode)
            if len(sel):
                t = self._tables(mode)
                out[sel] = _count(t.dist, t.cnt, self._row[dst[sel]], src[sel], t.host_ptr, t.host_nbr)
        return out

    def _one_kind(self, dst: np.ndarray) -> _Tables | None:
        """The tables every destination in ``dst`` is routed on, if they share one kind (after ``_prepare``)."""
        modes = self._mode[dst]
        if len(modes) and (modes == modes[0]).all():
            return self._tables(int(modes[0]))
        return None

    def walk(self, src, dst, index) -> tuple[np.ndarray, np.ndarray, int]:
        """Links of path ``index[f]`` (0 <= index < count) of each flow, concatenated in flow order, the offsets
        (flow f's links are ``links[ptr[f]:ptr[f + 1]]``), and the first flow with no path (-1: none)."""
        src = np.ascontiguousarray(src, dtype=np.int64)
        dst = np.ascontiguousarray(dst, dtype=np.int64)
        index = np.ascontiguousarray(index, dtype=np.int64)
        self._prepare(dst)
        t = self._one_kind(dst)
        if t is not None:
            return _walk(t.indptr, t.indices, t.edge_link, t.dist, t.cnt, self._row[dst], src, dst, index, t.host_ptr,
                         t.host_nbr, t.host_up, t.host_down, t.final)
        pieces, ptr = [], [0]
        for f in range(len(src)):  # destinations on both kinds of tables (a YAML fabric): one flow at a time
            links, _, bad = self.walk(src[f:f + 1], dst[f:f + 1], index[f:f + 1])
            if bad >= 0:
                return links, np.zeros(len(src) + 1, dtype=np.int64), f
            pieces.append(links)
            ptr.append(ptr[-1] + len(links))
        return (np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)), np.array(ptr), -1

    def hash_paths(self, src, dst, key: int) -> tuple[np.ndarray, np.ndarray, int]:
        """The ``hash`` rule's path of each flow (flow f keyed ``key + f``), as :meth:`walk` answers."""
        src = np.ascontiguousarray(src, dtype=np.int64)
        dst = np.ascontiguousarray(dst, dtype=np.int64)
        counts = self.count(src, dst)
        if len(counts) and counts.min() == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(len(src) + 1, dtype=np.int64), int(np.argmin(counts))
        return self.walk(src, dst, flow_hashes(src, dst, key, CRC_TABLE) % counts)

    def hash_route(self, flows: np.ndarray, key: int, flow_weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """The ``hash`` rule for flows (rows of (src host, dst host); flow f keyed ``key + f``) summed over the
        flows: sorted link ids, the flows on each (times ``flow_weights[f]``, if not empty), and the first flow
        with no path (-1: none).

        Why a first call before preparing anything: once a destination's table is built, a start's flows need no
        numpy pass over their destinations here (which tables, which rows: four numpy calls a start, as much as
        the walk of a small job); the compiled call checks every destination and says if one is not ready."""
        first = self._switches is not None
        t = self._switches if first else self._whole_graph()
        ids, sums, bad = _hash_route(t.indptr, t.indices, t.edge_link, t.dist, t.cnt, self._mode, 1 if first else 2,
                                     self._row, flows, key, CRC_TABLE, flow_weights, t.host_ptr, t.host_nbr,
                                     t.host_up, t.host_down, t.final, self.scratch)
        if bad != NOT_ON_TABLES:
            return ids, sums, bad
        dst = flows[:, 1]
        self._prepare(dst)
        t = self._one_kind(dst)
        if t is None:  # destinations on both kinds of tables (a YAML fabric): the paths, then their sum
            links, ptr, bad = self.hash_paths(flows[:, 0], dst, key)
            if bad >= 0:
                return links, np.zeros(0), bad
            per_flow = np.ones(len(flows)) if not len(flow_weights) else flow_weights
            ids, sums = accumulate(links, np.repeat(per_flow, np.diff(ptr)), self.scratch)
            return ids, sums, -1
        return _hash_route(t.indptr, t.indices, t.edge_link, t.dist, t.cnt, self._mode, int(self._mode[dst[0]]),
                           self._row, flows, key, CRC_TABLE, flow_weights, t.host_ptr, t.host_nbr, t.host_up,
                           t.host_down, t.final, self.scratch)

    def split(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray, int]:
        """Every link on a shortest path a -> b, how many of the paths use it, and the number of paths."""
        self._prepare(np.array([b], dtype=np.int64))
        t = self._tables(int(self._mode[b]))
        row = self._row[b]
        return _split(t.indptr, t.indices, t.edge_link, t.dist[row], t.cnt[row], a, b, t.host_ptr, t.host_nbr,
                      t.host_up, t.host_down, t.final)

    def nbytes(self) -> int:
        """Memory held by the tables."""
        return sum(t.nbytes() for t in (self._switches, self._whole) if t is not None)
