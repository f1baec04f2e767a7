"""Sphinx configuration for the cudriver documentation."""

from __future__ import annotations

import os
import sys

try:  # the installed package (its compiled core built at install)
    import cudriver
except ImportError:  # a checkout whose core was built in place
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
autodoc_default_options = {"members": True}
# Keep the alias's name in signatures, linked to its entry in the API reference.
autodoc_type_aliases = {"StreamLike": "cudriver.StreamLike"}

# Nitpicky builds (-n) check every cross-reference to cudriver. References into other
# projects resolve through intersphinx when their inventories can be fetched; on a
# build machine without network access they cannot be checked, so they are not
# reported.
nitpick_ignore_regex = [
    (r"py:.*", r"(builtins|collections|typing|typing_extensions|types|os|sys|enum|asyncio)\b.*"),
    (r"py:.*", r"(ctypes|uuid)\b.*"),
    # Sphinx renders a type alias inside a union as a forward reference.
    (r"py:class", r"TypeAliasForwardRef|'cudriver\.StreamLike'"),
    # Type variables of overloads.
    (r"py:class", r".*\._[TF]"),
    (r"py:.*", r"(numpy|npt|cuda)\b.*"),
    (r"py:class", r"[A-Z][A-Za-z]*(Error|Exception|Warning)"),
    (r"py:class", r"(int|float|str|bytes|bool|object|tuple|list|dict|type|None|Any|Self|Callable)"),
    (r"py:class", r"(Ellipsis|\.\.\.)"),
]
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
