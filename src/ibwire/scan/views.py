"""Scanner views of MAD bodies: a few fields of an attribute, as scanner columns.

The scanner stops at the MAD and RMPP headers; a MAD body is :mod:`ibwire.mads`' work. A
*view* is the exception, for the fields a batch analysis needs on every packet: the CM fields
that pair a connection's two sides (IBA Vol. 1 12.6: a REQ's Local Communication ID, QPN,
starting PSN, service ID, path MTU and transport type; a REP's; the communication IDs every
later message echoes; the QPN a DREQ names). A view is a header slot of the scanner like the BTH, laid over the whole attribute
(so it is present only when the attribute fits before the ICRC, as ``ibwire.parse`` needs
it), whose fields are some of the attribute's declared fields, at their declared bits.

A view may gather one field from several attributes: :data:`CM_LOCAL` is the Local
Communication ID of every CM message that has one (Wireshark's ``cm.req``, ``cm.rep``,
``cm.rtu.localcommid`` ...), at the same bits in each; building the view checks that they
are. Where Wireshark names the field, the column has its name (``cm.req.localqpn``); a
gathered field is named in the same style (``cm.localcommid``, ``cm.remotecommid``).
"""

from __future__ import annotations

from collections.abc import Mapping

from ibwire.headers import cm
from ibwire.headers.layout import Field, Record
from ibwire.tables import mad_attributes


class View(Record):
    """Fields of MAD attributes, at their bits in the attribute: ``sources`` maps each
    attribute's record (``cm.rep``) to {column key: the record's field}. Not a declaration:
    it only reads, it builds nothing."""

    def __init__(self, name: str, title: str,
                 sources: Mapping[Record, Mapping[str, str]]) -> None:
        # no Construct declaration: the fields are the records' own (Header.__init__ unused)
        self.name, self.title, self.declaration = name, title, None
        self.sources = {record.name: dict(picks) for record, picks in sources.items()}
        sizes = {record.size for record in sources}
        if len(sizes) != 1:
            raise ValueError(f"view {name}: attributes of different sizes {sorted(sizes)}")
        self.size = sizes.pop()
        fields: dict[str, Field] = {}
        for record, picks in sources.items():
            for key, source in picks.items():
                f = record.by_name[source]
                mine = Field(key, f.bits, f.shift, f.fmt)
                if fields.setdefault(key, mine) != mine:
                    raise ValueError(f"view {name}: {key} is {source} in {record.name}, "
                                     f"at other bits than in the other attributes")
        self.fields = tuple(sorted(fields.values(), key=lambda f: -f.shift))
        self.by_name = {f.name: f for f in self.fields}

    def __repr__(self) -> str:
        return f"<View {self.title} ({len(self.fields)} fields)>"

    def build(self, values: Mapping[str, object]) -> bytes:
        raise TypeError(f"{self.title} is a scanner view: build the attribute itself")

    def attributes(self) -> list[tuple[int, int]]:
        """(MgmtClass, AttributeID) of the MADs that carry the view (``specs/``)."""
        return sorted(key for key, row in mad_attributes().items() if row.record in self.sources)


#: The Local Communication ID of every CM message that has one (not SIDR: a request ID).
CM_LOCAL = View("cm.local", "CM Local Communication ID", {
    cm.CM_REQ: {"cm.localcommid": "cm.req"},
    cm.CM_REP: {"cm.localcommid": "cm.rep"},
    **{m: {"cm.localcommid": f"{m.name}.localcommid"}
       for m in (cm.CM_MRA, cm.CM_REJ, cm.CM_RTU, cm.CM_DREQ, cm.CM_DREP, cm.CM_LAP,
                 cm.CM_APR)},
})

#: The Remote Communication ID: every CM message after the REQ echoes the peer's local one.
CM_REMOTE = View("cm.remote", "CM Remote Communication ID", {
    m: {"cm.remotecommid": f"{m.name}.remotecommid"}
    for m in (cm.CM_MRA, cm.CM_REJ, cm.CM_REP, cm.CM_RTU, cm.CM_DREQ, cm.CM_DREP, cm.CM_LAP,
              cm.CM_APR)
})

#: What a ConnectRequest offers: its service ID, QPN, starting PSN, path MTU and transport
#: service type (RC 0, UC 1, RD 2, XRC 3: ibta_vol1_c12.h CM_REQ_TRANSPORT_SERVICE_TYPE).
CM_REQ = View("cm.req", "CM ConnectRequest", {cm.CM_REQ: {
    k: k for k in ("cm.req.serviceid", "cm.req.localqpn", "cm.req.startpsn", "cm.req.pppmtu",
                   "cm.req.transpsvctype")}})

#: What a ConnectReply answers: its QPN and starting PSN.
CM_REP = View("cm.rep", "CM ConnectReply", {cm.CM_REP: {
    k: k for k in ("cm.rep.localqpn", "cm.rep.startpsn")}})

#: The QPN a DisconnectRequest names at its receiver (Wireshark's name, sic: ``cm.req.``).
CM_DREQ = View("cm.dreq", "CM DisconnectRequest", {cm.CM_DREQ: {
    "cm.req.remoteqpneecn": "cm.req.remoteqpneecn"}})

VIEWS: tuple[View, ...] = (CM_LOCAL, CM_REMOTE, CM_REQ, CM_REP, CM_DREQ)
