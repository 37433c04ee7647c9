"""How the network models' kernels are compiled (numba).

``JIT``: cached to disk, without the GIL, and with numpy's error model: every division in the kernels is
guarded, and the check numba otherwise adds to each one (to raise ZeroDivisionError) costs about 4% of the
mean field's time; results are bit-identical.

Every kernel also runs as plain Python under ``NUMBA_DISABLE_JIT=1``: the test suite runs the network tests
that way once (``tests/test_no_jit.py``), so coverage sees the kernels' lines and a kernel that only works
compiled (or only interpreted) is caught.
"""

JIT = dict(cache=True, nogil=True, error_model="numpy")
