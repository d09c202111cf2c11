"""Wireshark as a reference peer: tshark's output flattened, the field mapping, its mistakes."""
