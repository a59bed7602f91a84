"""pytest-bdd step definitions, loaded as pytest plugins by ``conformance.plugin``."""
