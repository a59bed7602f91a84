"""Every scenario of every feature shipped with the contract."""

from pytest_bdd import scenarios

from pi_contract import features_dir

scenarios(str(features_dir()))
