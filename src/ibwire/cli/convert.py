"""``ibwire convert IN OUT --to erf|infiniband|pcap|pcapng``.

* ``--to erf``: a LINKTYPE_INFINIBAND (247) capture into ERF type 21 records in a pcap
  (LINKTYPE_ERF, 197), which Wireshark opens (it rejects 247);
* ``--to infiniband``: ERF InfiniBand records (ibdump, Endace DAG) into a 247 pcap;
* ``--to pcap``: a pcapng into a pcap (one link type);
* ``--to pcapng``: a pcap (or any capture) into a pcapng, the timestamp resolution kept.

The input is never modified; the output is written atomically.
"""

from __future__ import annotations

import argparse

CONVERSIONS = {"erf": "infiniband_to_erf", "infiniband": "erf_to_infiniband",
               "pcap": "pcapng_to_pcap", "pcapng": "pcap_to_pcapng"}
"""--to: the ibwire.pcap function that converts."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="IN", help="capture to read (or - for stdin)")
    parser.add_argument("output", metavar="OUT", help="capture to write")
    parser.add_argument("--to", required=True, choices=sorted(CONVERSIONS),
                        help="erf: 247 -> ERF; infiniband: ERF -> 247; pcap: pcapng -> pcap; "
                        "pcapng: pcap -> pcapng")
    parser.add_argument("--strict", action="store_true",
                        help="fail on the first unreadable record instead of skipping it")


def run(args: argparse.Namespace) -> int:
    import ibwire.pcap

    convert = getattr(ibwire.pcap, CONVERSIONS[args.to])
    report = convert(args.input, args.output, strict=args.strict)
    print(f"{args.output}: {report.records_written} records written, "
          f"{report.records_skipped} skipped")
    for error in report.errors:
        print(f"  skipped: {error}")
    return 1 if report.errors else 0
