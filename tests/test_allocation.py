"""NetAllocation: the per-job network decision's fields, their checks and the kinds it asks a model for."""

import math

import pytest

from netlab.errors import InputError
from netlab.sched import DEFAULT_ALLOCATION, NetAllocation


def test_default_changes_nothing():
    a = NetAllocation()
    assert a == DEFAULT_ALLOCATION and a.is_default
    assert a.kinds() == frozenset()
    assert (a.priority, a.weight, a.rate_cap_gbps, a.paths) == (0, 1.0, None, None)


def test_kinds_name_what_differs_from_the_default():
    assert NetAllocation(priority=3).kinds() == {"priority"}
    assert NetAllocation(weight=2.0).kinds() == {"weight"}
    assert NetAllocation(rate_cap_gbps=5.0).kinds() == {"rate_cap"}
    assert NetAllocation(paths=(1,)).kinds() == {"path"}
    assert NetAllocation(priority=1, weight=0.5, rate_cap_gbps=1.0, paths=(0, 1)).kinds() == {
        "priority", "weight", "rate_cap", "path"}
    assert not NetAllocation(priority=7).is_default


@pytest.mark.parametrize("field, value", [
    ("priority", -1), ("priority", 8), ("priority", 1.0), ("priority", True),
    ("weight", 0), ("weight", -1.0), ("weight", math.inf), ("weight", math.nan), ("weight", "2"),
    ("rate_cap_gbps", 0.0), ("rate_cap_gbps", -3), ("rate_cap_gbps", math.nan),
    ("paths", ()), ("paths", (-1,)), ("paths", [0, 1]), ("paths", (0.5,)), ("paths", (True,)),
])
def test_bad_fields_are_refused_naming_the_field(field, value):
    with pytest.raises(InputError, match=f"field '{field}'"):
        NetAllocation(**{field: value})


def test_an_infinite_cap_is_allowed_and_hashable():
    a = NetAllocation(rate_cap_gbps=math.inf, paths=(2, 0))
    assert {a: 1}[NetAllocation(rate_cap_gbps=math.inf, paths=(2, 0))] == 1
