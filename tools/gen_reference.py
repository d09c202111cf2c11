"""Write docs/reference/fields.md and docs/reference/wireshark.md from the project's own
declarations.

Every header's fields with their bit ranges come from the Construct declarations
(``ibwire.headers.ALL``, the MAD attribute records of ``ibwire.mads``), the scanner's columns
from ``ibwire.scan.program``, the keys ``show --json`` adds from ``ibwire.filter_fields``.
Only the citations (which IBA section or RFC defines each header) are written here.
The Wireshark page lists the known tshark mistakes the differential tests and ``ibwire fuzz``
model (``ibwire.fuzz.wireshark.divergences.DIVERGENCES``). tests/docs/test_reference.py fails
when a page is not what this tool writes; run ``python tools/gen_reference.py`` after a
change to a declaration.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reference" / "fields.md"
WIRESHARK_PAGE = ROOT / "docs" / "reference" / "wireshark.md"

#: Where each header is defined: IBA Vol. 1 (Release 1.4) sections, annexes, RFCs.
SOURCES: dict[str, str] = {
    "eth": "IEEE 802.3 clause 3.1.1",
    "vlan": "IEEE 802.1Q clause 9.6",
    "ip": "RFC 791 section 3.1; DSCP RFC 2474, ECN RFC 3168",
    "ipv6": "RFC 8200 section 3",
    "udp": "RFC 768",
    "lrh": "IBA 7.7",
    "grh": "IBA 8.3",
    "bth": "IBA 9.2",
    "rdeth": "IBA 9.3.1",
    "deth": "IBA 9.3.2",
    "xrceth": "IBA Annex A14",
    "reth": "IBA 9.3.3",
    "atomiceth": "IBA 9.3.4",
    "aeth": "IBA 9.3.5",
    "atomicacketh": "IBA 9.3.6",
    "immdt": "IBA 9.3.7",
    "ieth": "IBA 9.3.8",
    "feth": "IBA Annex A19",
    "cnppad": "IBA Annex A17.9 (RoCEv2 CNP)",
    "mad": "IBA 13.4.3",
    "rmpp": "IBA 13.6.2",
}
#: MAD body declarations, by the module that holds them.
MODULE_SOURCES = {"cm": "IBA 12.6", "mad": "IBA 13.4.8", "smp": "IBA 14.2.5",
                  "sa": "IBA 15.2.5", "perf": "IBA 16.1.3"}

INTRO = """\
# Field names

<!-- Written by tools/gen_reference.py from the declarations: do not edit. -->

Every header field ibwire reads has one name, used everywhere: the keys of `show --json`,
the columns of the scanner (`ibwire.scan`) and of `export`, the fields of `--where`, the
keys of `ibwire.build` and `Packet.fields()`, the `changed` fields of `rewrite --report`.
Names are Wireshark's `infiniband.*` display-filter fields without the `infiniband.` prefix
where Wireshark has them (`bth.destqp`, `reth.va`), and the same style where it does not
(`bth.fecn`); Ethernet, VLAN, IP and UDP fields are Wireshark's own (`eth.src`, `vlan.id`,
`ip.dsfield.ecn`, `udp.dstport`).

Bits are counted from 0, the most significant bit of the header's first byte, as the IBA
figures count them; a field of whole bytes is shown as a byte range. Numbers are unsigned
big-endian on the wire; addresses (MAC, IPv4, IPv6, GID) are text in JSON and in exports.

Encapsulations: `rocev2_ipv4`, `rocev2_ipv6` (any number of 802.1Q/802.1ad tags, IPv4
options), `rocev1` (ethertype 0x8915), `ib_local` (LRH, LNH=2), `ib_global` (LRH+GRH). The
header chain after the BTH comes from `specs/opcodes.tsv` (all 86 opcodes: RC, UC, RD, UD,
XRC, CNP, FLUSH, ATOMIC_WRITE); reserved and vendor opcodes keep their bytes and a reason
(`strict=True` raises). Every error is an `ibwire.IbwireError` naming the header, field and
byte offset; `TruncatedError` (more data needed) is distinct from `MalformedError` (a field
lies).
"""


def _bits(size_bytes: int, width: int, shift: int) -> str:
    first = size_bytes * 8 - shift - width
    last = first + width - 1
    if width % 8 == 0 and first % 8 == 0:
        return f"byte {first // 8}" if width == 8 else f"bytes {first // 8}-{last // 8}"
    return f"{first}" if width == 1 else f"{first}-{last}"


def _header_table(layout: object, source: str, columns: set[str]) -> list[str]:
    from ibwire.headers.fields import Layout

    assert isinstance(layout, Layout)
    lines = [f"### {layout.title} (`{layout.name}`, {layout.size} bytes)", "",
             f"Source: {source}.", "",
             "| key | bits | width | scanner column |", "|---|---|---|---|"]
    for field in layout.fields:
        key = layout.key(field.name)
        if field.name.startswith("reserved") and key not in columns:
            continue
        kind = f" ({field.fmt})" if field.fmt else ""
        lines.append(f"| `{key}` | {_bits(layout.size, field.bits, field.shift)} | "
                     f"{field.bits}{kind} | {'yes' if key in columns else ''} |")
    return lines + [""]


def _record_source(record: object) -> str:
    from ibwire.headers import cm, mad, perf, sa, smp

    for module in (cm, mad, perf, sa, smp):
        if any(value is record for value in vars(module).values()) or any(
                record in value for value in vars(module).values()
                if isinstance(value, tuple)):
            return MODULE_SOURCES[module.__name__.rsplit(".", 1)[1]]
    raise LookupError(f"no source for {record!r}")


def page() -> str:
    from ibwire import filter_fields, mads
    from ibwire.headers import ALL
    from ibwire.headers.aeth import decode_syndrome
    from ibwire.scan import program, views

    columns = {c.name for c in program.columns()}
    out = [INTRO, "## Headers", "",
           "The headers of the packet up to the MAD header, in wire order. Each field is a "
           "key of `show --json` and of `--where`; those marked are also columns of the "
           "batch scanner (`ibwire.scan.scan_capture`) and of `ibwire export`.", ""]
    for name, layout in ALL.items():
        out += _header_table(layout, SOURCES[name], columns)

    out += ["## Scanner columns that are not header fields", "",
            "Columns of every batch of `ibwire.scan.scan_capture` (`ibwire.scan.program.FIXED`). "
            "`record` counts from 0 in the scanner's columns, from 1 wherever a record is "
            "named (`show`, `check`, `export`).", "",
            "| column | type | meaning |", "|---|---|---|"]
    for name, dtype, meaning in program.FIXED:
        out.append(f"| `{name}` | `{dtype}` | {meaning.replace('|', '/')} |")
    out.append("")

    out += ["## CM views (scanner columns read past the MAD header)", "",
            "The CM fields that pair a connection's two sides (IBA 12.6), as columns of every "
            "batch (`ibwire.scan.views`). A view is present only where the MAD is that CM "
            "message and the whole attribute ends by the ICRC; elsewhere its columns are 0 "
            "and its `headers` bit is clear.", "",
            "| view | column | bits of the attribute | width |", "|---|---|---|---|"]
    for view in views.VIEWS:
        for field in view.fields:
            out.append(f"| `{view.name}` | `{field.name}` | "
                       f"{_bits(view.size, field.bits, field.shift)} | {field.bits} |")
    out.append("")

    derived = sorted({k for s in range(256) for k in decode_syndrome(s)})
    out += ["## Keys `show --json` adds", "",
            "| key | kind |", "|---|---|"]
    for key, kind in filter_fields.INSPECTION.items():
        out.append(f"| `{key}` | {kind} |")
    out.append("| `ip.options` | bytes (hex) |")
    for key in derived:
        out.append(f"| `{key}` | the AETH syndrome's parts (IBA 9.7.5.2.8) |")
    out.append("")

    out += ["## MAD bodies", "",
            "After the MAD header (and the RMPP header of SA), the class header and the "
            "attribute `specs/mad_attributes.tsv` names. Keys are Wireshark's field names "
            "without `infiniband.`; a field that repeats (P_Key entries, an SA "
            "GetTableResp's records) is a list in wire order. Bits count from the start of "
            "the attribute (or class header). Not scanner columns, except the CM views above.",
            ""]
    for record in (*mads.RECORDS.values(), *mads.FRAMES):
        lines = [f"### {record.title} ({record.size} bytes)", "",
                 f"Source: {_record_source(record)}.", "",
                 "| key | bits | width |", "|---|---|---|"]
        for field in record.fields:
            if field.name.endswith((".padding", ".gap")) or "reserved" in field.name:
                continue
            lines.append(f"| `{field.name}` | {_bits(record.size, field.bits, field.shift)} | "
                         f"{field.bits} |")
        out += lines + [""]
    out += ["### Keys derived from MAD bodies", "",
            "Other views of the same bytes, as Wireshark gives them: the RDMA CM service ID "
            "split and IP private data (IBA Annex A11), RMPP data words by type, PortInfo's "
            "CapabilityMask bits, a Notice's details by trap number, directed-route SMP "
            "fields.", ""]
    out += [", ".join(f"`{k}`" for k in sorted(mads.DERIVED_KEYS)), ""]
    return "\n".join(out)


WIRESHARK_INTRO = """\
# Known Wireshark mistakes ibwire does not copy

<!-- Written by tools/gen_reference.py from ibwire.fuzz.wireshark: do not edit. -->

ibwire is tested field by field against tshark (tests/diff, and `ibwire fuzz --target
wireshark`). Where tshark 4.0.17 is wrong, ibwire gives the value the IBA layout gives, and
the comparison models tshark's mistake so that it is expected: each entry below is one such
model (`ibwire.fuzz.wireshark.divergences.DIVERGENCES`), with the reason and the measurement
behind it. A tshark that fixes one shows up as a difference naming the entry to drop.
`ibwire fuzz --allow` takes `{"divergence": NAME}` lines to allow some of them only.

Also: Wireshark never verifies an ICRC or VCRC (it shows them), and cannot open
`LINKTYPE_INFINIBAND` (247) captures: `ibwire convert --to erf` makes them readable.

| name | what tshark does, and why |
|---|---|
"""


def wireshark_page() -> str:
    from ibwire.fuzz.wireshark.divergences import DIVERGENCES

    rows = [f"| {d.name} | {d.reason.replace('|', '/')} |" for d in DIVERGENCES]
    return WIRESHARK_INTRO + "\n".join(rows) + "\n"


def pages() -> dict[Path, str]:
    """Each generated page and its text."""
    return {PAGE: page(), WIRESHARK_PAGE: wireshark_page()}


def main(argv: list[str]) -> int:
    stale = [path for path, text in pages().items()
             if not path.is_file() or path.read_text() != text]
    if "--check" in argv:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is stale: run python tools/gen_reference.py")
        return 1 if stale else 0
    for path, text in pages().items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
