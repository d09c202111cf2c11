"""Shared test fixtures: where the shared reference material and captures are."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("IBWIRE_SHARED", ROOT.parent / "shared"))
REFERENCE = SHARED / "reference"
CAPTURES = SHARED / "captures"


def load_vectors() -> list[dict[str, Any]]:
    path = REFERENCE / "vectors.json"
    if not path.exists():
        return []
    return json.loads(path.read_text())["vectors"]


def vector_link(vector: dict[str, Any]) -> str:
    return "infiniband" if vector["starts_with"] == "LRH" else "ethernet"


@pytest.fixture(scope="session")
def vectors() -> list[dict[str, Any]]:
    found = load_vectors()
    if not found:
        pytest.fail(f"reference vectors not found under {REFERENCE} (set IBWIRE_SHARED)")
    return found
