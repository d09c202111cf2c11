"""Where each frame of a batch carries an IB transport packet, and its BTH/AETH words.

The compiled fast path does it in C (``relay_classify``: the Ethernet, VLAN, IP/GRH and UDP
headers walked, the ICRC placed by the IP or GRH length); its twin takes the same columns
from the batch scanner (:func:`ibwire.scan.scan_frames`). Columns: ``ib``,
``offset.network``, ``offset.bth``, ``offset.icrc``, ``bth.opcode``, ``bth.destqp``,
``bth.psn``, ``aeth.syndrome``, ``aeth.msn``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ibwire.impair import _io
from ibwire.scan.program import ERROR_NAMES

OK, MALFORMED = ERROR_NAMES.index("ok"), ERROR_NAMES.index("malformed")

COLUMNS = ("offset.network", "offset.bth", "offset.icrc", "bth.opcode", "bth.destqp",
           "bth.psn", "aeth.syndrome", "aeth.msn")


def classify(data: Any, offsets: np.ndarray, lengths: np.ndarray, fast: bool = True
             ) -> dict[str, np.ndarray]:
    if fast and _io.fast is not None:
        return _io.fast.classify(data, offsets, lengths)
    from ibwire.scan import scan_frames

    cols = scan_frames(data, offsets, lengths, np.zeros(len(offsets), np.uint8),
                       fields=["bth.opcode", "bth.destqp", "bth.psn", "aeth.syndrome",
                               "aeth.msn"])
    # an IB transport packet wherever the BTH and the ICRC are placed, malformed from the
    # BTH on (a lying PadCnt, a reserved opcode) or not, as the C classifier reads frames
    ib = (((cols["error"] == OK) | (cols["error"] == MALFORMED)) & (cols["offset.bth"] >= 0)
          & (cols["offset.icrc"] >= 0) & (cols["encapsulation"] >= 5))
    out = {name: cols[name] for name in COLUMNS}
    out["ib"] = ib
    return out
