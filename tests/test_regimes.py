"""Transport regimes (netlab.network.regimes): each names a registered network model and a referee transport."""

import pytest

from netlab.errors import UnknownNameError
from netlab.network import DEFAULT_NETWORK, DEFAULT_REGIME, NETWORKS, REGIMES, regime
from netlab.network.regimes import regime_of_network, regimes
from netlab.validate.scenario import REGIMES as REFEREE_TRANSPORTS


def test_the_four_regimes_of_issue_26_are_registered():
    assert {"reno-deep", "reno-shallow", "dctcp", "dcqcn"} <= set(REGIMES.names())


@pytest.mark.parametrize("name", REGIMES.names())
def test_every_regime_names_a_registered_model_and_a_referee_transport(name):
    r = regime(name)
    assert r.name == name and r.description
    assert r.network in NETWORKS  # what `netlab simulate --network` takes
    assert r.referee in REFEREE_TRANSPORTS  # what benchmarks/bench_referee.py scores it against
    model = NETWORKS.create(r.network)
    assert model.name == r.network  # a result table names the model the run used
    assert type(model.fresh()) is type(model) and model.fresh().params == getattr(model, "params", None)


def test_the_default_regime_is_the_default_model():
    assert regime(DEFAULT_REGIME).network == DEFAULT_NETWORK
    assert DEFAULT_REGIME in regime_of_network(DEFAULT_NETWORK)


def test_an_unknown_regime_is_one_clear_error_naming_every_regime():
    with pytest.raises(UnknownNameError) as err:
        regime("infiniband", field="regime")
    assert "infiniband" in str(err.value) and all(r.name in str(err.value) for r in regimes())


def test_variant_keyword_arguments_override_its_defaults():
    dcqcn = NETWORKS.create("dcqcn")
    assert NETWORKS.create("dcqcn", lead=1.5).params.lead == 1.5
    assert NETWORKS.create("dcqcn", lead=1.5).params.alpha == dcqcn.params.alpha


def test_cli_lists_the_regimes():
    from typer.testing import CliRunner

    from netlab.cli import app

    out = CliRunner().invoke(app, ["regimes"])
    assert out.exit_code == 0, out.output
    for r in regimes():
        assert r.name in out.output and f"--network {r.network}" in out.output
