"""Layer 5, launches: argument packing, configuration, plans, kernels, compiling, linking, modules.

A module here imports only lower layers and earlier modules of this one
(``docs/architecture.md``; ``tests/test_imports.py`` checks it).
"""
