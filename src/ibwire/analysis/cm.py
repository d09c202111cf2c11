"""CM MADs of a capture (REQ, REP, RTU, REJ, DREQ, DREP on QP1) into CM sessions, and the
hints the connection pairing takes from them.

A REQ names the active side's QPN and the Starting PSN it expects, its REP the passive
side's (:mod:`ibwire.transport.cm`): request packets from A to B for QP Y then belong to the
connection whose requester is the QP at A that Y was connected to, whatever the traffic
alone would suggest. CM MADs are rare, so :func:`cm_messages` reads them with
:func:`ibwire.parse`, one row at a time; it is the one place that reads them and can switch
to scanner columns (``cm.req.localqpn`` ...) when the scanner has them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ibwire.analysis.addresses import row_addresses
from ibwire.errors import IbwireError
from ibwire.scan.program import slot_bit
from ibwire.transport.cm import CM_CLASS, CmSession, CmSessions

#: Scanner columns the CM reading needs (besides the addresses).
FIELDS = ("mad.mgmtclass", "mad.attributeid")

Address = tuple[int, int]


def cm_messages(batch: Any) -> Iterator[tuple[Address, Address, int, dict[str, Any]]]:
    """(source, destination address words, attribute ID, fields) of each CM MAD of a
    scanned batch, in capture order (a MAD that does not parse is skipped)."""
    for _, src, dst, attribute, fields in cm_records(batch):
        yield src, dst, attribute, fields


def cm_records(batch: Any) -> Iterator[tuple[int, Address, Address, int, dict[str, Any]]]:
    """:func:`cm_messages`, each with the record number of its packet first."""
    from ibwire.dissect import parse

    cols = batch.columns
    has_mad = ((cols["headers"] & slot_bit("mad")) != 0) & (cols["error"] == 0)
    rows = np.flatnonzero(has_mad & (cols["mad.mgmtclass"] == CM_CLASS))
    if not len(rows):
        return
    sh, sl, dh, dl = row_addresses(cols, rows)
    for i, row in enumerate(rows.tolist()):
        try:
            fields = parse(bytes(batch.frame(row)), batch.link(row)).fields()
        except IbwireError:
            continue
        yield (int(cols["record"][row]), (int(sh[i]), int(sl[i])), (int(dh[i]), int(dl[i])),
               int(cols["mad.attributeid"][row]), fields)


class CmIndex:
    """The CM sessions of a capture, and which requester QPN a request stream has."""

    def __init__(self) -> None:
        self.sessions = CmSessions()

    def feed(self, batch: Any) -> None:
        for src, dst, attribute, fields in cm_messages(batch):
            self.sessions.receive(src, dst, attribute, fields)

    def requester_of(self, src: Address, dst: Address, qpn: int
                     ) -> tuple[CmSession, int | None] | None:
        """The session that connected QP ``qpn`` at ``dst`` to a QP at ``src``, and that
        QP's number (None when the capture did not show it), or None."""
        for session in reversed(self.sessions.list):
            for here, there in ((session.passive, session.active),
                                (session.active, session.passive)):
                if (here.get("address") == dst and here.get("qpn") == qpn
                        and there.get("address") == src):
                    return session, there.get("qpn")
        return None
