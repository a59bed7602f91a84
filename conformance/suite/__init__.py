"""The packaged conformance suite: binds every feature to pytest-bdd scenarios."""
