"""Layer 6, graphs: nodes, graphs (built node by node or captured) and executable graphs.

A module here imports only lower layers and earlier modules of this one
(``docs/architecture.md``; ``tests/test_imports.py`` checks it).
"""
