"""Layer 1, lifetimes: owning handles, releases, pins, captures, host functions.

A module here imports only lower layers and earlier modules of this one
(``docs/architecture.md``; ``tests/test_imports.py`` checks it).
"""
