"""Layer 2, contexts: devices, contexts, green contexts, and what travels between processes.

A module here imports only lower layers and earlier modules of this one
(``docs/architecture.md``; ``tests/test_imports.py`` checks it).
"""
