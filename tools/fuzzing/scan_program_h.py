#!/usr/bin/env python3
"""Write the scanner's program as C data, for the libFuzzer harnesses of tools/fuzzing/c/.

The C scanner (src/ibwire/scan/scan.c) reads no field by name: its callers (scan/_engine.pyx,
scan/_tally.pyx) hand it a program built from ``ibwire.scan.program`` and
``ibwire.scan._layout`` (``fill_layout`` and ``_Compiled`` in _layout.pxi / _engine.pyx). A
harness that made up its own program would test a scanner no caller runs; this writes the real
one, at build time, as one header:

* ``fuzz_program(prog, instr, slots, verdicts)``: what ``fill_layout``, ``set_extents`` and
  ``_Compiled`` do, for the columns of the header slots whose bit is set in ``slots``;
* the column widths (``fuzz_column_width``) to allocate each column exactly;
* the Linux cooked header links (``fuzz_sll_keys``/``fuzz_sll_codes``), as _tally.pyx builds
  them from ``ibwire.pcap.linktypes.sll_link_codes``.

Usage: python tools/fuzzing/scan_program_h.py OUT.h
"""

from __future__ import annotations

import sys
from pathlib import Path


def _array(ctype: str, name: str, values: list[int] | bytes) -> str:
    items = ", ".join(str(v) for v in values) or "0"
    return f"static const {ctype} {name}[] = {{{items}}};\n"


def source() -> str:
    from ibwire.pcap.linktypes import sll_link_codes
    from ibwire.scan import _layout, program

    cols = program.columns()
    instr = program.instructions()
    extents = program.view_extents()
    views = _layout.MAD_VIEWS
    slot = _layout.SLOT
    sll = sorted(sll_link_codes().items())
    out = ["/* Written by tools/fuzzing/scan_program_h.py from ibwire.scan.program: do not edit. */\n",
           "#include <string.h>\n#include \"scan.h\"\n\n",
           f"#define FUZZ_NCOLUMNS {len(cols)}\n",
           f"#define FUZZ_NSLOTS {len(_layout.SLOT_SIZES)}\n",
           f"#define FUZZ_NSLL {len(sll)}\n",
           _array("int", "fuzz_column_width", [c.width for c in cols]),
           _array("int", "fuzz_slot_size", list(_layout.SLOT_SIZES)),
           _array("uint8_t", "fuzz_chain", _layout.CHAIN),
           _array("uint8_t", "fuzz_chain_len", _layout.CHAIN_LEN),
           _array("uint8_t", "fuzz_op_flags", _layout.OP_FLAGS),
           _array("uint8_t", "fuzz_rmpp", _layout.RMPP),
           _array("uint32_t", "fuzz_view_key", [k for k, _ in views]),
           _array("int32_t", "fuzz_view_slot", [s for _, s in views]),
           _array("int32_t", "fuzz_view_extent",
                  [extents.get(s, _layout.SLOT_SIZES[s]) for _, s in views]),
           _array("uint32_t", "fuzz_sll_keys", [a << 16 | p for (a, p), _ in sll]),
           _array("uint8_t", "fuzz_sll_codes", [c for _, c in sll]),
           "static const ibw_scan_instr fuzz_all_instr[] = {\n"]
    for ins in instr:
        out.append(f"    {{{ins.mask}ULL, {ins.column}, {ins.at}, {ins.load}, {ins.shift}, "
                   f"{ins.width}, 0}},\n")
    out.append("};\n")
    out.append(_array("int32_t", "fuzz_instr_slot", [ins.slot for ins in instr]))
    out.append(f"""
/* The program of the columns of the slots set in `slots` (bit i: slot i), as _engine.pyx's
 * _Compiled builds it; instr must have room for FUZZ_NCOLUMNS. Returns the column count. */
static int fuzz_program(ibw_scan_prog *g, ibw_scan_instr *instr, uint32_t slots, int verdicts)
{{
    memset(g, 0, sizeof *g);
    g->nslots = FUZZ_NSLOTS;
    for (int s = 0; s < FUZZ_NSLOTS; s++)
        g->slot_size[s] = fuzz_slot_size[s];
    g->chain = fuzz_chain;
    g->chain_len = fuzz_chain_len;
    g->op_flags = fuzz_op_flags;
    g->rmpp = fuzz_rmpp;
    g->nviews = {len(views)};
    for (int i = 0; i < {len(views)}; i++) {{
        g->view_key[i] = fuzz_view_key[i];
        g->view_slot[i] = fuzz_view_slot[i];
        g->view_extent[i] = fuzz_view_extent[i];
    }}
    g->eth = {slot["eth"]}; g->vlan = {slot["vlan"]}; g->ip = {slot["ip"]};
    g->ipv6 = {slot["ipv6"]}; g->udp = {slot["udp"]}; g->lrh = {slot["lrh"]};
    g->grh = {slot["grh"]}; g->bth = {slot["bth"]}; g->deth = {slot["deth"]};
    g->mad = {slot["mad"]}; g->rmpp_slot = {slot["rmpp"]};
    g->site_slot_base = {_layout.SITE_SLOT_BASE};
    g->site_padcnt = {_layout.SITE_PADCNT};
    g->verdicts = verdicts;
    int n = 0;
    for (int i = 0; i < FUZZ_NCOLUMNS; i++) {{
        int s = fuzz_instr_slot[i];
        if (!(slots >> s & 1))
            continue;
        if (g->slot_count[s] == 0)
            g->slot_first[s] = n;
        g->slot_count[s]++;
        instr[n++] = fuzz_all_instr[i];
    }}
    g->instr = instr;
    return n;
}}
""")
    return "".join(out)


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    Path(sys.argv[1]).write_text(source())


if __name__ == "__main__":
    main()
