"""Session checks: the shared captures must be there when ``IBWIRE_REQUIRE_SHARED=1``
(``tests/corpus.py`` says where they are looked for)."""

from __future__ import annotations

import pytest

from tests import corpus


def pytest_configure(config: pytest.Config) -> None:
    if corpus.required() and not corpus.PRESENT:
        raise pytest.UsageError(f"{corpus.MISSING} ({corpus.REQUIRE_ENV} is set)")


def pytest_report_header(config: pytest.Config) -> str:
    if corpus.PRESENT:
        return f"shared captures: {corpus.CAPTURES}"
    return f"shared captures: absent, their tests skipped ({corpus.MISSING})"
