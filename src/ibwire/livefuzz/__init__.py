"""Fuzzing a live RDMA stack from the wire (issue #34): packets injected into (or mutated on
their way between) two real endpoints' live connections, the kernels' own reports as
findings, shrunk to replayable repros.

- :mod:`.state` -- the live connections a sniffer learns (QPNs, PSNs, MSNs, CM IDs);
- :mod:`.shots` -- packets described against a connection, their hypothesis strategies, and
  rendering them into frames for any live connection of the same scenario;
- :mod:`.drawer` -- hypothesis draws on demand, from a seed;
- :mod:`.hook` -- the in-flight mutator, a hook for ``ibwire.impair``'s forwarder;
- :mod:`.console` -- kernel console reports (WARNING, BUG, Oops ...) as findings;
- :mod:`.shrink` -- bisecting a batch and shrinking a packet with bounded trials;
- :mod:`.findings` -- the findings directory.

The rig that boots the guests and runs a campaign is ``tools/fuzz_live.py`` with
``tools/rxe_rig``. Needs the ``fuzz`` extra (hypothesis).
"""
