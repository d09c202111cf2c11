"""scapy layers for MAD bodies: one per attribute ibwire declares, and the class headers.

Every layer is made from a declaration of :mod:`ibwire.mads` (``RECORDS`` and ``FRAMES``,
Construct declarations in :mod:`ibwire.headers`): nothing here repeats a layout. A layer's
field names are the last part of ibwire's keys (``cm.req.localqpn`` is ``localqpn``, a REQ's
Local Communication ID ``cm.req`` is ``req``), so ``show --json`` says what to read::

    pkt = Ether(raw_frame)
    pkt[CM_REQ].localqpn, pkt[CM_REQ].startpsn
    pkt[PortInfo].lid                      # an SMP: MAD / SMPLID / PortInfo / SMPLIDTail
    pkt[PathRecord].dgid                   # SA: MAD / RMPP / SAHeader / PathRecord

Which layer follows the MAD (and RMPP) header is the walk ibwire's dissector makes
(:func:`ibwire.mads.plan`, by management class, attribute ID, method and RMPP header), so a
scapy packet has the parts :func:`ibwire.parse` finds, in the same order. An attribute
layer also holds what its area leaves (``padding``: the key ``<attribute>.padding``, or
``sa.padding`` after an SA table), the bytes between table records (``gap``), and a
MultiPathRecord its GIDs (``sdgid``). Where the attribute is a table (P_KeyTable,
GUIDInfo ..., the records of an SA GetTableResp) every field holds a list in wire order, as
ibwire's keys do; a single value given for such a field is used for every entry.

Building: ``MAD()/CM_REQ(localqpn=0x11)`` fills the MAD's class, attribute ID, class version
and method from the layers above it (while they are None), and each part's padding with
zeros, so a MAD built with defaults is a whole valid 256-byte MAD. Values are checked by the
declaration's codec: a value that does not fit raises :class:`ibwire.errors.BuildError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from scapy.config import conf
from scapy.fields import Field
from scapy.packet import Packet

from ibwire import mads as body
from ibwire.errors import BuildError, IbwireError
from ibwire.headers import sa, smp
from ibwire.headers.layout import Record
from ibwire.headers.perf import PERF_HEADER
from ibwire.scapy.transport import MAD, RMPP
from ibwire.tables import mad_attributes


def short_name(key: str) -> str:
    """The scapy field name of an ibwire key: its last part (``cm.req.localqpn`` -> ``localqpn``)."""
    return key.rpartition(".")[2]


class BodyField(Field[Any, Any]):
    """A value of a MAD body part: a number, address text or bytes, or a list of them (a
    table). The bytes are read and written by the part's declaration, not by this field."""

    __slots__: list[str] = []
    islist = 1  # a list is one value (scapy's Packet.__iter__ makes one packet of it)

    def __init__(self, name: str, default: Any = 0) -> None:
        super().__init__(name, default, "0s")

    def any2i(self, pkt: Packet | None, x: Any) -> Any:
        if isinstance(x, (bytearray, memoryview)):
            return bytes(x)
        return list(x) if isinstance(x, tuple) else x

    def addfield(self, pkt: Packet, s: bytes, val: Any) -> bytes:
        return s

    def getfield(self, pkt: Packet, s: bytes) -> tuple[bytes, Any]:
        return s, None

    def i2repr(self, pkt: Packet | None, x: Any) -> str:
        return repr(x)


#: Parts folded into the layer of the part before them: fillers (``.padding``) and the GIDs
#: of a MultiPathRecord.
_EXTRA = {sa.MULTI_PATH_RECORD.name: sa.MULTI_PATH_GID}


def _follows(part: body.Part) -> bool:
    return part.header.name.endswith(".padding") or part.header is sa.MULTI_PATH_GID


def _values_of(layer: Packet, record: Record) -> dict[str, Any]:
    return {f.name: v for f in record.fields
            if (v := layer.getfieldval(short_name(f.name))) is not None}


class Walk:
    """:func:`ibwire.mads.plan` taken one layer at a time: a lead part, then the parts the
    same layer holds (:meth:`followers`), asked for only once the lead's values are seen."""

    def __init__(self, mad: Mapping[str, Any], rmpp: Mapping[str, Any] | None) -> None:
        self.seen: dict[str, Any] = {}
        self._parts = body.plan(mad, rmpp, self.seen)
        self.held: body.Part | None = None

    def next(self) -> body.Part | None:
        if self.held is not None:
            part, self.held = self.held, None
            return part
        return next(self._parts, None)

    def followers(self) -> list[body.Part]:
        out = []
        while (part := self.next()) is not None:
            if not _follows(part):
                self.held = part
                break
            out.append(part)
        return out


class MADPart(Packet):
    """A part of a MAD body, read and written by one declaration of :mod:`ibwire.mads`."""

    record: ClassVar[Record]
    #: The MgmtClass a class header stands for (None for attributes).
    mgmtclass: ClassVar[int | None] = None

    # -- where the layer is ------------------------------------------------------------------

    def _walk(self) -> Walk | None:
        """The plan of the MAD below, walked past the parts of the layers below this one;
        None when there is no MAD below or the layers below are not the plan's."""
        lower: list[MADPart] = []
        rmpp = None
        under = self.underlayer
        while isinstance(under, MADPart):
            lower.append(under)
            under = under.underlayer
        if isinstance(under, RMPP):
            rmpp, under = under, under.underlayer
        if not isinstance(under, MAD):
            return None
        walk = Walk(mad_values(under), rmpp_values(rmpp) if rmpp is not None else None)
        for layer in reversed(lower):
            lead = walk.next()
            if lead is None or lead.header is not layer.record:
                return None
            walk.seen.update(_values_of(layer, layer.record))
            walk.followers()
        return walk

    def _parts(self, wire: bytes | None = None) -> tuple[list[body.Part], body.Part | None,
                                                         dict[str, Any]]:
        """This layer's parts (its lead first), the next layer's lead part, and the lead's
        values when read; ``wire`` is the bytes being dissected (else the field values say
        what the plan needs)."""
        try:
            walk = self._walk()
            lead = walk.next() if walk is not None else None
            if walk is not None and lead is not None and lead.header is self.record:
                values = {}
                if not lead.entries:  # a table's values size nothing after it
                    values = self._lead_values(wire)
                    walk.seen.update(values)
                return [lead, *walk.followers()], walk.held, values
        except IbwireError:  # a layout the values contradict (SA AttributeOffset ...)
            pass
        entries = _ENTRIES.get(self.record.name, 0)
        alone = body.Part(self.record, entries, self.record.size if entries else 0)
        return [alone], None, {}

    def _lead_values(self, wire: bytes | None) -> dict[str, Any]:
        if wire is not None:
            if len(wire) < self.record.size:
                return {}
            return body.split_items(self.record.parse(wire))
        values = _values_of(self, self.record)
        try:
            return body.split_items(self.record.parse(body.build_record(self.record, values)))
        except IbwireError:
            return values

    # -- dissection ------------------------------------------------------------------------------

    def do_dissect(self, s: bytes) -> bytes:
        parts, following, lead_values = self._parts(s)
        fields = self.fields
        for f in self.fields_desc:
            fields[f.name] = None
        offset = 0
        for part in parts:
            if offset + part.size > len(s):
                break  # cut short: the rest stays payload
            values = lead_values if offset == 0 and lead_values else \
                body.parse_part(part, s, offset)
            for key, value in values.items():
                fields[_field_name(part, key)] = value
            offset += part.size
        self.__dict__["_ibwire_next"] = following
        self.raw_packet_cache = s[:offset]
        self.raw_packet_cache_fields = {
            name: list(value) for name, value in fields.items() if isinstance(value, list)}
        self.explicit = 1
        return s[offset:]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        following = self.__dict__.get("_ibwire_next")
        if following is None:
            return super().guess_payload_class(payload)
        return layer_for(following, payload)

    # -- building --------------------------------------------------------------------------------

    def self_build(self) -> bytes:
        cache = self.raw_packet_cache
        if cache is not None and self.raw_packet_cache_fields is not None and all(
                self.getfieldval(k) == v for k, v in self.raw_packet_cache_fields.items()):
            return cache
        parts, _, _ = self._parts()
        out = bytearray()
        for part in parts:
            header = part.header
            if _follows(part) and header is not sa.MULTI_PATH_GID:
                out += self._padding(part)
                continue
            values = {f.name: v for f in header.fields
                      if (v := self.getfieldval(short_name(f.name))) is not None}
            if not part.entries:
                out += body.build_record(header, values)
                continue
            values = {k: v if isinstance(v, list) else [v] * part.entries
                      for k, v in values.items()}
            gap = self.getfieldval("gap") if part.gap else None
            if gap is not None:
                values[f"{header.name}.gap"] = gap if isinstance(gap, list) else \
                    [gap] * part.entries
            gids = self.getfieldval("sdgid") if header is sa.MULTI_PATH_RECORD else None
            if gids is not None and part.gap:
                values["multipathrecord.sdgid"] = gids
            out += body.build_entries(part, values)
        return bytes(out)

    def _padding(self, part: body.Part) -> bytes:
        value = self.getfieldval("padding")
        if value is None:
            return bytes(part.size)
        value = bytes(value)
        if len(value) != part.size:
            raise BuildError(f"{part.header.name} is {part.size} bytes, got {len(value)}",
                             header=part.header.name.rpartition(".")[0], field="padding")
        return value

    # -- ibwire's view ----------------------------------------------------------------------------

    def ibwire_fields(self) -> dict[str, Any]:
        """This layer's values under ibwire's keys (as :meth:`ibwire.Packet.fields` has them)."""
        parts, _, _ = self._parts()
        out: dict[str, Any] = {}
        for part in parts:
            names = [f.name for f in part.header.fields]
            if part.gap:
                names.append(f"{part.header.name}.gap")
                if part.header is sa.MULTI_PATH_RECORD:  # a table's GIDs (ibwire.mads)
                    names.append("multipathrecord.sdgid")
            for key in names:
                value = self.getfieldval(_field_name(part, key))
                if value is not None:
                    out[key] = value
        return out


def _field_name(part: body.Part, key: str) -> str:
    if key.endswith(".padding") and part.header.title == "reserved":
        return "padding"
    return short_name(key)


def layer_for(part: body.Part, payload: bytes) -> type[Packet]:
    """The layer of ``part`` if ``payload`` holds it, else Raw."""
    layer = LAYERS_BY_RECORD.get(part.header.name)
    if layer is None or len(payload) < part.size:
        return conf.raw_layer
    return layer


def first_layer(mad: Packet, rmpp: Packet | None, payload: bytes) -> type[Packet] | None:
    """The layer after the MAD (and RMPP) header, or None when the class has no body ibwire
    decodes."""
    values = mad_values(mad)
    if values["mgmtclass"] not in body.DECODED:
        return None
    try:
        part = Walk(values, rmpp_values(rmpp) if rmpp is not None else None).next()
    except IbwireError:
        return conf.raw_layer
    return conf.raw_layer if part is None else layer_for(part, payload)


# -- the MAD's numbers from the layers above it --------------------------------------------------

def _frame_classes() -> dict[str, int]:
    """Class header name -> MgmtClass: the first part of each class's plan, if it has one."""
    out = {}
    for klass in body.DECODED:
        first = next(body.plan({"mgmtclass": klass, "attributeid": -1, "method": 0}, None, {}),
                     None)
        if first is not None:
            out[first.header.name] = klass
    return out


FRAME_CLASSES = _frame_classes()
#: Classes whose attributes follow the MAD header directly (CM).
_FRAMELESS = sorted(body.DECODED - set(FRAME_CLASSES.values()))
#: (MgmtClass, record name) -> AttributeID.
_ATTRIBUTE_IDS = {(row.mgmtclass, row.record): row.attribute
                  for row in mad_attributes().values()}
#: Record name -> entries of a table attribute (the same in every class that has it).
_ENTRIES = {row.record: row.entries for row in mad_attributes().values() if row.entries > 1}


def computed(mad: Packet) -> dict[str, int]:
    """MgmtClass, AttributeID, ClassVersion and Method as the layers above ``mad`` say: the
    class of its class header (SMPLID, SAHeader ...), else the class whose attributes follow
    the MAD header (CM); the attribute of the first attribute layer; the class's version and
    method (:data:`ibwire.mads.CLASS_DEFAULTS`). 0 for what no layer says."""
    klass, attribute = None, None
    layer = mad.payload
    while isinstance(layer, (MADPart, RMPP)):
        if isinstance(layer, MADPart):
            if layer.mgmtclass is not None:
                klass = layer.mgmtclass
            else:
                if klass is None:
                    klass = next((k for k in _FRAMELESS
                                  if (k, layer.record.name) in _ATTRIBUTE_IDS), None)
                attribute = _ATTRIBUTE_IDS.get((klass, layer.record.name))
                break
        layer = layer.payload
    version, method = body.CLASS_DEFAULTS.get(klass, (0, 0)) if klass is not None else (0, 0)
    return {"mgmtclass": klass or 0, "attributeid": attribute or 0, "classversion": version,
            "method": method}


#: MAD fields whose None means: from the layers above.
COMPUTED = ("mgmtclass", "classversion", "method", "attributeid")


def mad_values(mad: Packet) -> dict[str, Any]:
    values = {name: mad.getfieldval(name) for name in COMPUTED}
    if None in values.values():
        found = computed(mad)
        values = {k: found[k] if v is None else v for k, v in values.items()}
    return values


def rmpp_values(rmpp: Packet) -> dict[str, Any]:
    return {name: rmpp.getfieldval(name) or 0
            for name in ("rmppflags", "rmpptype", "data1", "data2")}


# -- the layers --------------------------------------------------------------------------------

def _fields(record: Record) -> list[Field[Any, Any]]:
    out: list[Field[Any, Any]] = [BodyField(short_name(f.name), 0 if f.fmt is None else None)
                                  for f in record.fields]
    extra = _EXTRA.get(record.name)
    if extra is not None:
        out += [BodyField(short_name(f.name), None) for f in extra.fields]
    return out


def _make(class_name: str, record: Record, title: str, klass: int | None,
          padding: bool, gap: bool) -> type[MADPart]:
    fields = _fields(record)
    if padding:
        fields.append(BodyField("padding", None))
    if gap:
        fields.append(BodyField("gap", None))
    names = [f.name for f in fields]
    clash = {n for n in names if names.count(n) > 1} | (set(names) & set(dir(Packet)))
    if clash:
        raise ImportError(f"{record.title}: scapy field name(s) {sorted(clash)} clash")
    return type(class_name, (MADPart,), {
        "name": title, "record": record, "mgmtclass": klass, "fields_desc": fields,
        "__module__": __name__, "__doc__": f"{title} ({record.name}.*)"})


def _attribute_names() -> dict[str, str]:
    """Record name -> class name: CM messages as ibwire.headers.cm names them (CM_REQ ...),
    the others by their name in specs/mad_attributes.tsv; a name two records share goes
    to the SMP one, the other gets 'GS' (the Notice an SA carries)."""
    from ibwire.headers import cm

    names = {record.name: constant for constant, record in vars(cm).items()
             if isinstance(record, Record) and record in cm.CM_MESSAGES}
    taken = set(names.values())
    rows = sorted(mad_attributes().values(), key=lambda r: r.mgmtclass not in (0x01, 0x81))
    for row in rows:
        if row.record in names:
            continue
        name = row.name if row.name not in taken else f"{row.name}GS"
        names[row.record] = name
        taken.add(name)
    return names


_FRAME_NAMES = {smp.SMP_LID.name: "SMPLID", smp.SMP_LID_TAIL.name: "SMPLIDTail",
                smp.SMP_DIRECTED.name: "SMPDirected",
                smp.SMP_DIRECTED_PATHS.name: "SMPDirectedPaths",
                sa.SA_HEADER.name: "SAHeader", PERF_HEADER.name: "PerfMgtHeader"}

LAYERS_BY_RECORD: dict[str, type[MADPart]] = {}
for _record, _name in _attribute_names().items():
    LAYERS_BY_RECORD[_record] = _make(_name, body.RECORDS[_record], body.RECORDS[_record].title,
                                      None, padding=True, gap=True)
for _frame in body.FRAMES:
    if _frame.name in _FRAME_NAMES:
        LAYERS_BY_RECORD[_frame.name] = _make(
            _FRAME_NAMES[_frame.name], _frame, _frame.title, FRAME_CLASSES.get(_frame.name),
            padding=_frame is sa.SA_HEADER, gap=False)

#: Every MAD body layer by its class name.
ATTRIBUTE_LAYERS: dict[str, type[MADPart]] = {cls.__name__: cls
                                              for cls in LAYERS_BY_RECORD.values()}
