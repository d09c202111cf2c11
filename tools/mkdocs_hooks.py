"""MkDocs hooks of the docs site (mkdocs.yml ``hooks:``).

The docstrings use Sphinx's cross-reference roles (``:func:`scan_capture```,
``:mod:`ibwire.scan.program```), which mkdocstrings shows as they are written; the site shows
the name alone, as code.
"""

from __future__ import annotations

import re

_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const):(?=<code>)")


def on_page_content(html: str, **kwargs: object) -> str:
    """Drop the role before each rendered ``<code>`` name."""
    return _ROLE.sub("", html)
