"""Reproduction experiments for the network-aware schedulers (Dally, CASSINI).

Each experiment is one sweep grid (so it runs on any sweep backend, resumes,
and returns tidy DataFrames) plus a function that turns the sweep into the
paper-style table: :mod:`.dally`, :mod:`.cassini`; the claims, acceptance
check and result files both share are in :mod:`.common`; which transport
regimes they run in, and which one each paper's setup corresponds to, in
:mod:`.regimes`. The notebooks ``02-dally`` and ``03-cassini`` are thin
shells over these functions.
"""

from .cassini import (CASSINI_GPUS, CASSINI_MODELS, CASSINI_TOPOLOGY, DEV_SEEDS, REPORT_SEEDS, cassini_cells,
                      cassini_claims, cassini_runs, cassini_summary, cassini_table, cassini_trace, cassini_vs_host,
                      loss_cause)
from .common import (BASELINE, CLAIMS, NETWORK_AWARE, NOT_ON_TESTBED, acceptance, claims_table, claims_vs_measured,
                     run, testbed_results, with_testbed, write_results)
from .dally import (DALLY_DEV_SEEDS, DALLY_POLICIES, DALLY_REPORT_POLICIES, DALLY_REPORT_SEEDS, DALLY_TOPOLOGY,
                    comm_overhead, congestion_setups, dally_claims, dally_grid, dally_table, locality_table)
from .regimes import PAPER_REGIMES, paper_regimes, regime_specs

__all__ = ["BASELINE", "CASSINI_GPUS", "CASSINI_MODELS", "CASSINI_TOPOLOGY", "CLAIMS", "DALLY_POLICIES",
           "DALLY_TOPOLOGY", "DEV_SEEDS", "NETWORK_AWARE", "PAPER_REGIMES", "REPORT_SEEDS", "acceptance",
           "cassini_cells", "cassini_claims", "cassini_runs", "cassini_summary", "cassini_table", "cassini_trace",
           "cassini_vs_host", "claims_table", "claims_vs_measured", "comm_overhead", "congestion_setups",
           "dally_claims", "dally_grid", "dally_table", "DALLY_DEV_SEEDS", "DALLY_REPORT_POLICIES",
           "DALLY_REPORT_SEEDS", "locality_table", "loss_cause", "paper_regimes", "regime_specs", "run",
           "write_results", "NOT_ON_TESTBED", "testbed_results", "with_testbed"]
