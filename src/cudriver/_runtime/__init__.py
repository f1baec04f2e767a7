"""Layer 0, the runtime: bindings versions, libcuda, initialisation, enums, mirrors.

A module here imports only lower layers and earlier modules of this one
(``docs/architecture.md``; ``tests/test_imports.py`` checks it).
"""
