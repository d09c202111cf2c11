"""The numbers MAD handling is keyed by (class values, RMPP flags, the directed-route hop
limit), apart from :mod:`ibwire.mads` and its Construct declarations: ``show``'s summary
lines sort MADs by them without loading the declarations."""

from __future__ import annotations

SMP_LID, SA_CLASS, PERF, CM_CLASS, SMP_DIRECTED = 0x01, 0x03, 0x04, 0x07, 0x81
#: Classes whose bodies ibwire decodes; other classes keep their bodies as payload.
DECODED = frozenset({SMP_LID, SA_CLASS, PERF, CM_CLASS, SMP_DIRECTED})
#: SA methods whose data is a table of records (ib_sa.h IB_SA_METHOD_GET_TABLE_RESP ...).
TABLE_METHODS = frozenset({0x92, 0x94})
RMPP_DATA, RMPP_ACTIVE, RMPP_FIRST, RMPP_LAST = 1, 0x1, 0x2, 0x4
#: Entries of a directed-route path (14.2.1.2): entry 0 is unused, so at most 63 hops.
MAX_HOPS = 63
#: Bytes of every MAD (header and body), 13.4.1.
MAD_SIZE = 256
