"""CM MADs of a capture (REQ, REP, RTU, REJ, DREQ, DREP on QP1) into CM sessions, and the
hints the connection pairing takes from them.

A REQ names the active side's QPN and the Starting PSN it expects, its REP the passive
side's (:mod:`ibwire.transport.cm`): request packets from A to B for QP Y then belong to the
connection whose requester is the QP at A that Y was connected to, whatever the traffic
alone would suggest. :func:`cm_records` reads the messages from the scanner's CM view
columns (``cm.localcommid``, ``cm.req.localqpn`` ...: set only where the whole attribute was
captured, as :func:`ibwire.parse` needs it); only a REJ, whose reason no view holds, and a
REP with Local QPN 0 (an XRC TGT's, whose QPN is its Local EE Context Number) are dissected.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ibwire.analysis.addresses import row_addresses
from ibwire.errors import IbwireError
from ibwire.scan.program import slot_bit
from ibwire.transport.cm import CM_CLASS, COMM_IDS, REJ, REP, CmSession, CmSessions

#: Scanner columns the CM reading needs (besides the addresses): the MAD header and the CM
#: views (a view's name selects all its columns).
FIELDS = ("mad.mgmtclass", "mad.attributeid", "cm.local", "cm.remote", "cm.req", "cm.rep",
          "cm.dreq")
#: The columns of the views a message's fields come from, under the keys ``parse`` gives.
_VIEW_KEYS = {"cm.req": ("cm.req.serviceid", "cm.req.localqpn", "cm.req.startpsn",
                         "cm.req.pppmtu", "cm.req.transpsvctype"),
              "cm.rep": ("cm.rep.localqpn", "cm.rep.startpsn"),
              "cm.dreq": ("cm.req.remoteqpneecn",)}

Address = tuple[int, int]


def cm_messages(batch: Any) -> Iterator[tuple[Address, Address, int, dict[str, Any]]]:
    """(source, destination address words, attribute ID, fields) of each CM connection
    message of a scanned batch, in capture order (one whose attribute was not wholly
    captured is left out, as ``parse`` leaves its fields out)."""
    for _, src, dst, attribute, fields in cm_records(batch):
        yield src, dst, attribute, fields


def cm_records(batch: Any) -> Iterator[tuple[int, Address, Address, int, dict[str, Any]]]:
    """:func:`cm_messages`, each with the record number of its packet first."""
    cols = batch.columns
    headers = cols["headers"]
    local = (headers & slot_bit("cm.local")) != 0
    if not local.any():  # no CM view anywhere (most batches): nothing more to look at
        return
    has_mad = ((headers & slot_bit("mad")) != 0) & (cols["error"] == 0)
    rows = np.flatnonzero(has_mad & (cols["mad.mgmtclass"] == CM_CLASS) & local)
    if not len(rows):
        return
    sh, sl, dh, dl = row_addresses(cols, rows)
    attributes = cols["mad.attributeid"][rows].tolist()
    for i, row in enumerate(rows.tolist()):
        attribute = attributes[i]
        names = COMM_IDS.get(attribute)
        if names is None:
            continue
        fields = _view_fields(cols, row, names)
        if attribute == REJ:
            fields.update(_dissected(batch, row, "cm.rej.reason"))
        elif attribute == REP and fields.get("cm.rep.localqpn") == 0:
            fields.update(_dissected(batch, row, "cm.rep.localeecn"))
        yield (int(cols["record"][row]), (int(sh[i]), int(sl[i])), (int(dh[i]), int(dl[i])),
               attribute, fields)


def _view_fields(cols: dict[str, np.ndarray], row: int, names: tuple[str, str, str]
                 ) -> dict[str, Any]:
    """One message's fields from the view columns, under ``parse``'s keys."""
    headers = int(cols["headers"][row])
    fields: dict[str, Any] = {names[1]: int(cols["cm.localcommid"][row])}
    if names[2] and headers & slot_bit("cm.remote"):
        fields[names[2]] = int(cols["cm.remotecommid"][row])
    for view, keys in _VIEW_KEYS.items():
        if headers & slot_bit(view):
            fields.update((k, int(cols[k][row])) for k in keys)
    return fields


def _dissected(batch: Any, row: int, key: str) -> dict[str, Any]:
    """Field ``key`` of a message no view holds (a REJ's reason, an XRC REP's EE context
    number), dissected; none where it does not parse."""
    from ibwire.dissect import parse

    try:
        fields = parse(bytes(batch.frame(row)), batch.link(row)).fields()
    except IbwireError:
        return {}
    return {key: fields[key]} if key in fields else {}


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
