"""Layer 3, work: memory operations, the await machinery, events and streams.

A module here imports only lower layers and earlier modules of this one
(``docs/architecture.md``; ``tests/test_imports.py`` checks it).
"""
