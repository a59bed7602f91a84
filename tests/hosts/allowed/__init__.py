"""Hosts that take a freedom the published contract allows; the suite must pass them."""
