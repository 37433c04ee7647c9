"""How the network models' kernels are compiled (numba).

``JIT``: cached to disk, without the GIL, and with numpy's error model: every division in the kernels is
guarded, and the check numba otherwise adds to each one (to raise ZeroDivisionError) costs about 4% of the
mean field's time; results are bit-identical.

Every kernel also runs as plain Python under ``NUMBA_DISABLE_JIT=1``: the test suite runs the network tests
that way once (``tests/test_no_jit.py``), so coverage sees the kernels' lines and a kernel that only works
compiled (or only interpreted) is caught.


Kernels that Python calls at every simulator event take their named tuples (``Rows``, ``LinkArrays``,
``MeanFieldCounts``) either as such or as plain tuples of the same fields (``tuple(rows)``), and name them on
entry (``t = Rows(*t)``): numba types a plain tuple in C but a named tuple in Python, about 3-5 us more a call,
a few percent of a full-Philly run over its ~100,000 such calls.
"""

JIT = dict(cache=True, nogil=True, error_model="numpy")
