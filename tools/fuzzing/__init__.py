"""The coverage-guided fuzz campaign's parts (``tools/fuzz_atheris.py`` runs them).

* :mod:`tools.fuzzing.images` turns a fuzzer's bytes into inputs: raw (the bytes are the
  frame or the capture file, mutated by libFuzzer directly) or structured (hypothesis
  strategies from :mod:`ibwire.strategies` and :mod:`ibwire.mad_strategies` drawn from the
  bytes, then packed into pcap/pcapng images with lying lengths, cuts and garbage);
* :mod:`tools.fuzzing.targets` holds the entry points (parse, scan, rewrite, show, check) and
  their oracles: no exception but an ``IbwireError``, and the C engines agree with their
  pure-Python twins.
"""
