"""The observer's counters and the bounds of what it remembers of a connection, shared by
its two twins (``ibwire.transport._observer`` and ``_observer_python``) and
:mod:`ibwire.transport.observed`."""

from __future__ import annotations

#: Counters, by the names of the JSON output and the generation manifest.
COUNTERS = ("data_packets", "retransmitted_packets", "nak_retransmissions",
            "timeout_retransmissions", "rnr_retransmissions", "duplicates", "out_of_order",
            "psn_gaps", "messages", "messages_completed", "data_bytes", "acks",
            "naks_psn_seq_error", "rnr_naks", "naks_other", "read_responses",
            "read_responses_resent", "read_response_bytes_resent", "payload_bytes",
            "atomic_acks", "cnps", "ecn_ce_packets")
LATENCIES = ("nak_generation_ns", "nak_response_ns", "retransmission_ns")
#: Columns a connection's rows carry (numpy arrays of one length, capture order).
ROW_FIELDS = ("record", "time", "opcode", "psn", "ackreq", "syndrome", "dmalen", "va",
              "payload", "ce", "icrc_bad")
#: The stall threshold by default (``ibwire qp --stall-ms``).
STALL_NS = 10_000_000
#: Request rows remembered for latencies (previous transmission of a PSN, NAK generation).
HISTORY = 8192
#: AckReq packets waiting for their ACK, at most (the oldest are dropped beyond it).
MAX_PENDING = 1 << 16
#: READs and atomics waiting for their answers, at most.
MAX_ANSWERS = 4096
