"""Sphinx configuration for the cudriver documentation."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "src")))

import cudriver

project = "cudriver"
author = "The cudriver authors"
copyright = "2026, The cudriver authors"
release = cudriver.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = f"cudriver {release}"

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_numpy_docstring = True
napoleon_google_docstring = False
myst_heading_anchors = 3

# Each inventory is fetched from its site; on a build machine without network access
# the empty local inventory stands in, and cross-references render as plain text.
_offline = "_inventories/empty.inv"
intersphinx_mapping = {
    "python": ("https://docs.python.org/3", (None, _offline)),
    "cuda-bindings": (
        "https://nvidia.github.io/cuda-python/cuda-bindings/latest/",
        (None, _offline),
    ),
    "numpy": ("https://numpy.org/doc/stable/", (None, _offline)),
}
intersphinx_timeout = 5
exclude_patterns += ["_inventories"]
