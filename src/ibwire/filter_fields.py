"""Every field name ``--where`` knows, and what kind of value each holds: the keys
``show --json`` prints (``Inspection.fields``), from the header declarations, the MAD
attributes, the values derived from them (AETH syndrome, IPv4 options) and the verdicts.

A filter naming anything else is refused (``ibwire.where``), with the nearest names.
"""

from __future__ import annotations

import difflib
from functools import cache

#: The kinds of value: a number, an address (shown as text), text, a verdict, bytes.
NUMBER, ADDRESS, TEXT, VERDICT, BYTES = "number", "address", "text", "verdict", "bytes"

#: What ``Inspection.fields`` adds to a packet's own fields.
INSPECTION = {"frame": NUMBER, "timestamp_ns": NUMBER, "link": TEXT, "encapsulation": TEXT,
              "bth.opcode.name": TEXT, "payload.length": NUMBER, "icrc_ok": VERDICT,
              "vcrc_ok": VERDICT, "error": TEXT, "icrc": NUMBER, "vcrc": NUMBER,
              # a packet a snap length cut (headers-only captures)
              "cut": VERDICT, "payload.captured": NUMBER, "frame.len": NUMBER,
              "frame.orig_len": NUMBER}
#: Wireshark's names for keys ibwire spells otherwise.
ALIASES = {"frame.number": "frame"}


@cache
def known_fields() -> dict[str, str | None]:
    """Each field name a filter may use -> its kind (None: several kinds, or not known)."""
    from ibwire import mads
    from ibwire.headers import ALL
    from ibwire.headers.aeth import decode_syndrome

    out: dict[str, str | None] = {}
    for spec in ALL.values():
        out.setdefault(spec.name, None)  # a bare header name: is it there
        for field in spec.fields:
            kind = NUMBER if field.fmt is None else BYTES if field.fmt == "bytes" else ADDRESS
            out[spec.key(field.name)] = kind
    for syndrome in range(256):
        for key, value in decode_syndrome(syndrome).items():
            out[key] = NUMBER if isinstance(value, int) else TEXT
    out["ip.options"] = BYTES
    for key in (*mads.body_keys(), *mads.DERIVED_KEYS):
        out.setdefault(key, None)
    for key in list(out):  # the header a MAD body key belongs to, alone: is it there
        head = key.rsplit(".", 1)[0]
        out.setdefault(head, None)
    out.update(INSPECTION)
    return out


def canonical(name: str) -> str:
    """``name`` as ibwire keys it: Wireshark's ``infiniband.`` prefix dropped, aliases
    resolved."""
    if name.startswith("infiniband."):
        name = name[len("infiniband."):]
    return ALIASES.get(name, name)


def is_known(name: str) -> bool:
    return name in known_fields() or name.endswith((".padding", ".gap")) and \
        name.rsplit(".", 1)[0] in known_fields()


def nearest(name: str, count: int = 3) -> list[str]:
    """The known names closest to ``name``: by spelling, else those of its header."""
    names = known_fields()
    close = difflib.get_close_matches(name, names, n=count, cutoff=0.6)
    if close:
        return close
    head = name.split(".", 1)[0]
    return sorted(k for k in names if k.startswith(head + "."))[:count * 3]
