"""Layer 4, memory: buffers, pools, virtual memory, copies, DLPack, tensor maps.

A module here imports only lower layers and earlier modules of this one
(``docs/architecture.md``; ``tests/test_imports.py`` checks it).
"""
