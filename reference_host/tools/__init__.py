"""Model-facing tools of the reference host."""
