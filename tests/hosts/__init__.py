"""Variants of the reference host that prove the suite both strong and fair.

``broken/`` holds hosts that break one rule each: the suite must reject every one and blame
the right requirement. ``allowed/`` holds hosts that differ from the reference host only in
ways the published contract allows: the suite must pass every one. Run any of them as
``python tests/hosts/serve.py VARIANT --data-dir DIR --conformance``.
"""
