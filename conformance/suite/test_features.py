"""Every scenario of every feature shipped with the contract.

``pi-conformance run`` names the feature files of the scenarios it chose in
``PI_CONFORMANCE_FEATURES``; only those are collected. Without it (pytest run by hand),
every feature is.
"""

import os

from pytest_bdd import scenarios

from conformance.options import FEATURES_ENV
from pi_contract import features_dir

_chosen = [name for name in os.environ.get(FEATURES_ENV, "").split(",") if name]
if _chosen:
    scenarios(*(str(features_dir() / name) for name in _chosen))
else:
    scenarios(str(features_dir()))
