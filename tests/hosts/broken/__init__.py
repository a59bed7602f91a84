"""Hosts that each break one rule; the suite must reject them and blame the rule."""
