"""Capture editing with every CRC right: tcprewrite's IP, port, MAC, VLAN, TTL and class
options, RoCE and native InfiniBand options (QPN, PSN, P_Key, LID and GID maps), the ICRC
recomputed exactly when a field it covers changed, the VCRC where the packet changed, the
IPv4 and TCP/UDP checksums fixed (a zero UDP checksum stays zero).

* :class:`RewriteOptions` and its parsers (``ibwire.rewrite.options``);
* :func:`edit_frame` for one frame in place (``ibwire.rewrite.edit``);
* :func:`rewrite_capture` for a whole capture (``ibwire.rewrite.run``).
"""

from __future__ import annotations

from ibwire.rewrite.edit import FrameEdit, PsnPairs, edit_frame
from ibwire.rewrite.options import OptionError, RewriteOptions
from ibwire.rewrite.run import RewriteSummary, rewrite_capture

__all__ = ["FrameEdit", "OptionError", "PsnPairs", "RewriteOptions", "RewriteSummary",
           "edit_frame", "rewrite_capture"]
