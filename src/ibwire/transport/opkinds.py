"""What each BTH opcode is to the QP analysis: a request (and its family and position in a
message), an ACK/NAK, a READ response, an atomic ACK or a CNP, of RC and XRC alike (UC and
UD have no answers). Tables of 256 for numpy lookups, built from ``request_kinds()`` and the
opcodes of specs/opcodes.tsv."""

from __future__ import annotations

import numpy as np

from ibwire.transport.cnp import CNP_OPCODE
from ibwire.transport.segment import RESPONSES
from ibwire.transport.verbs import request_kinds

OTHER, REQUEST, ACK, READ_RESP, ATOMIC_ACK, CNP = range(6)
NONE, FIRST, MIDDLE, LAST, ONLY = range(5)
SEND, WRITE, READ, ATOMIC = 1, 2, 3, 4
_FAMILIES = {"send": SEND, "write": WRITE, "read": READ, "atomic": ATOMIC}
_POSITIONS = {"first": FIRST, "middle": MIDDLE, "last": LAST, "only": ONLY}


def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    kind = np.zeros(256, np.uint8)
    position = np.zeros(256, np.uint8)
    family = np.zeros(256, np.uint8)
    for value, k in request_kinds().items():
        kind[value], position[value], family[value] = (
            REQUEST, _POSITIONS[k.position], _FAMILIES[k.family])
    for responses in RESPONSES.values():
        kind[responses.ack] = ACK
        kind[responses.atomic_ack] = ATOMIC_ACK
        for value, pos in zip(responses.read, (FIRST, MIDDLE, LAST, ONLY), strict=True):
            kind[value], position[value] = READ_RESP, pos
    kind[CNP_OPCODE] = CNP
    return kind, position, family


KIND, POSITION, FAMILY = _tables()
