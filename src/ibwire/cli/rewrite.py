"""``ibwire rewrite IN OUT [options]``: tcprewrite's edits, RoCE-aware, every CRC right.

The IP, port, MAC, VLAN, TTL and class options are tcprewrite's (same spelling, same
meaning); ``--qpmap``, ``--psn-offset``, ``--pkey``, ``--dscp``, ``--ecn``, ``--lidmap`` and
``--gidmap`` edit the InfiniBand transport. The ICRC is recomputed only where a covered
field changed; ``--report`` writes one JSON line per packet; a summary goes to stderr.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="IN", help="capture to read (or - for stdin)")
    parser.add_argument("output", metavar="OUT", help="capture to write (atomically)")
    ip = parser.add_argument_group("IP and ports (tcprewrite's options)")
    ip.add_argument("--srcipmap", "-S", metavar="CIDR:CIDR,...", help="map source addresses")
    ip.add_argument("--dstipmap", "-D", metavar="CIDR:CIDR,...",
                    help="map destination addresses")
    ip.add_argument("--pnat", "-N", metavar="CIDR:CIDR,...", action="append",
                    help="map source and destination addresses ([v6 CIDR] in brackets)")
    ip.add_argument("--portmap", "-r", metavar="PORT:PORT,...", action="append",
                    help="map TCP/UDP ports: 80:8080, 8000-8999:80")
    ip.add_argument("--ttl", metavar="[+-]N", help="set, raise (+) or lower (-) TTL/hop limit")
    ip.add_argument("--tos", metavar="N", help="set the IPv4 TOS byte")
    ip.add_argument("--tclass", metavar="N", help="set the IPv6 traffic class")
    ip.add_argument("--flowlabel", metavar="N", help="set the IPv6 flow label")
    ip.add_argument("--dscp", metavar="N", help="set the DSCP (IPv4 and IPv6)")
    ip.add_argument("--ecn", metavar="N", help="set the ECN bits (0-3; 3 = CE)")
    ip.add_argument("--mtu-trunc", metavar="N", type=int,
                    help="truncate packets whose IP packet is longer than N bytes")
    ip.add_argument("--fixcsum", "-C", action="store_true",
                    help="recompute IPv4/TCP/UDP checksums of every packet")
    l2 = parser.add_argument_group("Ethernet (tcprewrite's options)")
    l2.add_argument("--enet-smac", metavar="MAC", help="set the source MAC")
    l2.add_argument("--enet-dmac", metavar="MAC", help="set the destination MAC")
    l2.add_argument("--enet-vlan", choices=("add", "del"), help="add or delete an 802.1Q tag")
    l2.add_argument("--enet-vlan-tag", metavar="N", help="VLAN id of --enet-vlan add")
    l2.add_argument("--enet-vlan-pri", metavar="N", help="priority of --enet-vlan add")
    l2.add_argument("--enet-vlan-cfi", metavar="N", help="CFI bit of --enet-vlan add")
    ib = parser.add_argument_group("InfiniBand transport (decimal or 0x-hex numbers)")
    ib.add_argument("--qpmap", metavar="OLD:NEW,...",
                    help="map QPNs: BTH destination QP, DETH source QP")
    ib.add_argument("--psn-offset", metavar="N|QPN:N", action="append",
                    help="add N to PSNs (24-bit wrap), of every QP or of one QP's requests "
                    "and the responses that carry its PSNs")
    ib.add_argument("--pkey", metavar="N", help="set the BTH P_Key")
    ib.add_argument("--lidmap", metavar="OLD:NEW,...", help="map LRH LIDs (native IB)")
    ib.add_argument("--gidmap", metavar="OLD=NEW,...", help="map GRH GIDs (native IB, IPv6 form)")
    ib.add_argument("--keep-bad-icrc", action="store_true",
                    help="leave an ICRC that was already wrong wrong (default: fix it)")
    parser.add_argument("--report", metavar="R.jsonl",
                        help="one JSON line per packet: fields changed, ICRC fate")


def options_from(args: argparse.Namespace) -> object:
    from ibwire.rewrite import options as o

    def num(value: str | None, what: str, bits: int) -> int | None:
        return None if value is None else o.number(value, what, bits)

    return o.RewriteOptions(
        srcipmap=o.cidr_map(args.srcipmap, "--srcipmap") if args.srcipmap else [],
        dstipmap=o.cidr_map(args.dstipmap, "--dstipmap") if args.dstipmap else [],
        pnat=o.cidr_map(",".join(args.pnat), "--pnat") if args.pnat else [],
        portmap=o.port_map(",".join(args.portmap)) if args.portmap else [],
        enet_smac=o.mac(args.enet_smac, "--enet-smac") if args.enet_smac else None,
        enet_dmac=o.mac(args.enet_dmac, "--enet-dmac") if args.enet_dmac else None,
        enet_vlan=args.enet_vlan,
        vlan_tag=num(args.enet_vlan_tag, "--enet-vlan-tag", 12),
        vlan_pri=num(args.enet_vlan_pri, "--enet-vlan-pri", 3),
        vlan_cfi=num(args.enet_vlan_cfi, "--enet-vlan-cfi", 1),
        ttl=o.ttl(args.ttl) if args.ttl else None,
        tos=num(args.tos, "--tos", 8), tclass=num(args.tclass, "--tclass", 8),
        flowlabel=num(args.flowlabel, "--flowlabel", 20),
        dscp=num(args.dscp, "--dscp", 6), ecn=num(args.ecn, "--ecn", 2),
        mtu_trunc=args.mtu_trunc, fixcsum=args.fixcsum,
        qpmap=o.number_map(args.qpmap, "--qpmap", 24) if args.qpmap else {},
        psn_offset=o.psn_offsets(args.psn_offset or [])[0],
        psn_offset_qp=o.psn_offsets(args.psn_offset or [])[1],
        pkey=num(args.pkey, "--pkey", 16),
        lidmap=o.number_map(args.lidmap, "--lidmap", 16) if args.lidmap else {},
        gidmap=o.gid_map(args.gidmap) if args.gidmap else {},
        keep_bad_icrc=args.keep_bad_icrc)


def run(args: argparse.Namespace) -> int:
    from ibwire.pcap.writer import AtomicFile
    from ibwire.rewrite import rewrite_capture

    options = options_from(args)
    if args.mtu_trunc is not None and args.mtu_trunc < 40:
        print("ibwire rewrite: --mtu-trunc must be at least 40", file=sys.stderr)
        return 2
    report = AtomicFile(args.report) if args.report else None
    text = None
    try:
        if report is not None:
            import io
            text = io.TextIOWrapper(report.file, encoding="utf-8", write_through=True)
        summary = rewrite_capture(args.input, args.output, options, text)  # type: ignore[arg-type]
        if text is not None:
            text.flush()
            text.detach()
            report.commit()  # type: ignore[union-attr]
    except BaseException:
        if report is not None:
            report.abort()
        raise
    print(f"ibwire rewrite: {args.output}: {summary.line()}", file=sys.stderr)
    return 0
