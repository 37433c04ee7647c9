"""Compiled kernels called from Python must find their compiled overload on every call after the first.

numba's dispatcher has a fast path in C for a call whose argument types it has seen; a call it cannot match
there (a keyword default left out was one: ``solve_rest`` without its ``loads``) falls back to
``_compile_for_args``, which types every argument again in Python, about 50 times the cost of the call itself,
and silently so: the results are the same. A run repeated in the same process with the same inputs calls
every kernel with types already seen, so the second run must not reach ``_compile_for_args`` at all.
"""

from collections import Counter
from unittest import mock

import pytest
from numba.core.dispatcher import Dispatcher

from netlab.run import run_one

# the bundled Philly sample submitted at once on a 128-GPU 4:1 fabric: components from 2 jobs (solved
# exactly) to dozens (the mean field), so both solve paths and the component split between them run
RUN = dict(trace="philly-sample", max_jobs=300, topology="leafspine,racks=4,hosts_per_rack=4,gpus_per_host=8,oversub=4",
           policy="tiresias", placement="consolidated", seed=0, batch=True, progress=False)
CASES = {
    "tcp": dict(network="tcp"),
    "tcp-phase-cores": dict(network="tcp", network_kwargs={"phase_cores": True}),
    "tcp-shallow": dict(network="tcp-shallow"),
    "dctcp": dict(network="dctcp"),
    "dcqcn": dict(network="dcqcn"),
    "fair": dict(network="fair"),
    "tcp-crux": dict(network="tcp", netpolicy="crux"),
    "tcp-joint": dict(network="tcp", netpolicy="joint"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_repeated_run_calls_no_kernel_through_the_slow_dispatch(case):
    params = {**RUN, **CASES[case]}
    first = run_one(params)
    seen = Counter()
    slow = Dispatcher._compile_for_args

    def counted(self, *args, **kwargs):
        seen[self.py_func.__qualname__] += 1
        return slow(self, *args, **kwargs)

    with mock.patch.object(Dispatcher, "_compile_for_args", counted):
        again = run_one(params)
    assert again.summary["avg_jct_s"] == first.summary["avg_jct_s"]  # the same run, so the same kernels' types
    assert first.summary["avg_slowdown"] > 1.0 or case == "fair"  # contended: the network model solved something
    assert not seen, f"kernels typed again in Python on every call: {dict(seen)}"
