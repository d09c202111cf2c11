"""Differential fuzzing of other InfiniBand/RoCE parsers, ibwire's dissection as the reference
(``ibwire fuzz``, issue #15).

:mod:`.generate` draws frames (valid, invalid, byte-edited) from :mod:`ibwire.strategies`;
:mod:`.targets` runs a command or a ``python:MODULE:FUNCTION`` child on a batch (and
:mod:`.wireshark.target` tshark); :mod:`.compare` holds the comparison rules and the
allow-list; :mod:`.run` is the loop; :mod:`.minimise` bisects a batch and shrinks a packet;
:mod:`.findings` writes ``findings.jsonl`` and the one-packet repros. Needs the ``fuzz`` extra
(hypothesis; pyshark for Wireshark).
"""
