"""The subcommands of ``pi-conformance``, one module each."""
