"""The field reference names every column the scanner produces and every key show --json
prints, and the generated reference pages are what tools/gen_reference.py writes."""

from __future__ import annotations

import importlib.util
import re

from ibwire import filter_fields
from ibwire.scan import program, scan_capture
from tests.docs.examples import ROOT

FIELDS = ROOT / "docs" / "reference" / "fields.md"


def _documented() -> set[str]:
    return set(re.findall(r"`([^`\s]+)`", FIELDS.read_text()))


def _scanner_columns() -> set[str]:
    """The columns a scan of a shipped capture produces, and every column the scanner's
    program declares (header fields, then the fixed ones)."""
    batch = next(iter(scan_capture(ROOT / "captures" / "sample-rocev2.pcap")))
    return {*batch.columns, *(c.name for c in program.columns()),
            *(name for name, _, _ in program.FIXED)}


def test_every_scanner_column_is_in_the_field_reference():
    columns = _scanner_columns()
    assert {"bth.psn", "error.site", "cm.req.localqpn"} <= columns
    missing = sorted(columns - _documented())
    assert not missing, f"docs/reference/fields.md lacks scanner columns {missing}"


def test_every_json_key_is_in_the_field_reference():
    documented = _documented()
    headers = {k.rsplit(".", 1)[0] for k in filter_fields.known_fields()}
    keys = [k for k in filter_fields.known_fields()
            if k not in headers and "reserved" not in k and not k.endswith((".padding", ".gap"))]
    missing = sorted(k for k in keys if k not in documented)
    assert not missing, f"docs/reference/fields.md lacks keys {missing[:20]} ({len(missing)})"


def test_generated_pages_are_current():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "tools" / "gen_reference.py")
    assert spec and spec.loader
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    stale = [p.name for p, text in tool.pages().items() if p.read_text() != text]
    assert not stale, f"{stale} are stale: run python tools/gen_reference.py"
