"""The scanner layout of ``ibwire.scan.declared.layout()``, written by
tools/gen_scan_layout.py; tests/scan/test_tally.py checks it is current. Do not
edit: run the tool."""

from __future__ import annotations

MAX_CHAIN = 4
MAX_VIEWS = 32
NO_OPCODE = 255
SLOT_SIZES = (14, 4, 20, 40, 8, 8, 40, 12, 4, 8, 4, 16, 28, 8, 4, 4, 4, 4, 16, 24, 12, 232, 232, 232, 232, 232)
SLOT: dict[str, int] = {
    "eth": 0,
    "vlan": 1,
    "ip": 2,
    "ipv6": 3,
    "udp": 4,
    "lrh": 5,
    "grh": 6,
    "bth": 7,
    "rdeth": 8,
    "deth": 9,
    "xrceth": 10,
    "reth": 11,
    "atomiceth": 12,
    "atomicacketh": 13,
    "aeth": 14,
    "immdt": 15,
    "ieth": 16,
    "feth": 17,
    "cnppad": 18,
    "mad": 19,
    "rmpp": 20,
    "cm.local": 21,
    "cm.remote": 22,
    "cm.req": 23,
    "cm.rep": 24,
    "cm.dreq": 25,
}
CHAIN = bytes.fromhex(
    "0000000000000000000000000f000000000000000f0000000b00000000000000000000000f0000000b000000"
    "0b0f00000b0000000e000000000000000e0000000e0000000e0000000e0d00000c0000000c00000000000000"
    "100000001000000000000000000000000000000000000000110b00000b000000000000000000000000000000"
    "00000000000000000f000000000000000f0000000b00000000000000000000000f0000000b0000000b0f0000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000809000008090000"
    "0809000008090f000809000008090f0008090b00080900000809000008090f0008090b0008090b0f08090b00"
    "080e000008000000080e0000080e0000080e0000080e0d0008090c0008090c00080900000000000000000000"
    "000000000000000000000000000000000809110b000000000000000000000000000000000000000000000000"
    "0000000009000000090f00000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000120000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000a0000000a0000000a0000000a0f00000a000000"
    "0a0f00000a0b00000a0000000a0000000a0f00000a0b00000a0b0f000a0b00000e000000000000000e000000"
    "0e0000000e0000000e0d00000a0c00000a0c0000000000000a1000000a100000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "000000000000000000000000"
)
CHAIN_LEN = bytes.fromhex(
    "000000010001010000010102010100010101020101ff0101ffffffff0201ffff000000010001010000010102"
    "ffffffffffffffffffffffffffffffffffffffff02020203020303020203030403020102020203030302ffff"
    "ffffffff04ffffffffffffff0102ffffffffffffffffffffffffffffffffffffffffffffffffffffff01ffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffff01010102010202010102020302010001"
    "0101020202ff0202ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
)
OP_FLAGS = bytes.fromhex(
    "0202020202020202020202020002020202000000000002020000000000020000020202020202020202020202"
    "0000000000000000000000000000000000000000020202020202020202020202000202020200000000000000"
    "0000000000000000000000000303000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000002020202020202020202020200020202"
    "0200000000000202000000000000000000000000000000000000000000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000"
)
RMPP = bytes.fromhex(
    "0000000100000000000000000000000000000100000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000"
)
MAD_VIEWS = (
    (0x70010, 0x15),
    (0x70010, 0x17),
    (0x70011, 0x15),
    (0x70011, 0x16),
    (0x70012, 0x15),
    (0x70012, 0x16),
    (0x70013, 0x15),
    (0x70013, 0x16),
    (0x70013, 0x18),
    (0x70014, 0x15),
    (0x70014, 0x16),
    (0x70015, 0x15),
    (0x70015, 0x16),
    (0x70015, 0x19),
    (0x70016, 0x15),
    (0x70016, 0x16),
    (0x70019, 0x15),
    (0x70019, 0x16),
    (0x7001a, 0x15),
    (0x7001a, 0x16),
)
WELL_KNOWN_QPS = (0, 1)
SITE_SLOT_BASE = 26
SITE_PADCNT = 52
MAD_BODY_HEADERS = (
    (0x7, 0x0),
    (0x1, 0x28),
    (0x81, 0x28),
    (0x4, 0x28),
    (0x3, 0x14),
)
STACKED_SLOTS = (1,)
VIEW_SLOTS = (21, 22, 23, 24, 25)
SLOT_LAYOUTS = (
    ('eth', 'Ethernet', 14, False, (
        ('dst', 48, 64, 'mac'),
        ('src', 48, 16, 'mac'),
        ('type', 16, 0, None),
    )),
    ('vlan', '802.1Q', 4, False, (
        ('priority', 3, 29, None),
        ('dei', 1, 28, None),
        ('id', 12, 16, None),
        ('etype', 16, 0, None),
    )),
    ('ip', 'IPv4', 20, False, (
        ('version', 4, 156, None),
        ('hdr_len', 4, 152, None),
        ('dsfield.dscp', 6, 146, None),
        ('dsfield.ecn', 2, 144, None),
        ('len', 16, 128, None),
        ('id', 16, 112, None),
        ('flags.rb', 1, 111, None),
        ('flags.df', 1, 110, None),
        ('flags.mf', 1, 109, None),
        ('frag_offset', 13, 96, None),
        ('ttl', 8, 88, None),
        ('proto', 8, 80, None),
        ('checksum', 16, 64, None),
        ('src', 32, 32, 'ipv4'),
        ('dst', 32, 0, 'ipv4'),
    )),
    ('ipv6', 'IPv6', 40, False, (
        ('version', 4, 316, None),
        ('tclass', 8, 308, None),
        ('flow', 20, 288, None),
        ('plen', 16, 272, None),
        ('nxt', 8, 264, None),
        ('hlim', 8, 256, None),
        ('src', 128, 128, 'ipv6'),
        ('dst', 128, 0, 'ipv6'),
    )),
    ('udp', 'UDP', 8, False, (
        ('srcport', 16, 48, None),
        ('dstport', 16, 32, None),
        ('length', 16, 16, None),
        ('checksum', 16, 0, None),
    )),
    ('lrh', 'LRH', 8, False, (
        ('vl', 4, 60, None),
        ('lver', 4, 56, None),
        ('sl', 4, 52, None),
        ('reserved2', 2, 50, None),
        ('lnh', 2, 48, None),
        ('dlid', 16, 32, None),
        ('reserved5', 5, 27, None),
        ('pktlen', 11, 16, None),
        ('slid', 16, 0, None),
    )),
    ('grh', 'GRH', 40, False, (
        ('ipver', 4, 316, None),
        ('tclass', 8, 308, None),
        ('flowlabel', 20, 288, None),
        ('paylen', 16, 272, None),
        ('nxthdr', 8, 264, None),
        ('hoplmt', 8, 256, None),
        ('sgid', 128, 128, 'ipv6'),
        ('dgid', 128, 0, 'ipv6'),
    )),
    ('bth', 'BTH', 12, False, (
        ('opcode', 8, 88, None),
        ('se', 1, 87, None),
        ('m', 1, 86, None),
        ('padcnt', 2, 84, None),
        ('tver', 4, 80, None),
        ('p_key', 16, 64, None),
        ('fecn', 1, 63, None),
        ('becn', 1, 62, None),
        ('resv6a', 6, 56, None),
        ('destqp', 24, 32, None),
        ('a', 1, 31, None),
        ('reserved7', 7, 24, None),
        ('psn', 24, 0, None),
    )),
    ('rdeth', 'RDETH', 4, False, (
        ('reserved', 8, 24, None),
        ('eecnxt', 24, 0, None),
    )),
    ('deth', 'DETH', 8, False, (
        ('q_key', 32, 32, None),
        ('reserved', 8, 24, None),
        ('srcqp', 24, 0, None),
    )),
    ('xrceth', 'XRCETH', 4, False, (
        ('reserved', 8, 24, None),
        ('xrcsrq', 24, 0, None),
    )),
    ('reth', 'RETH', 16, False, (
        ('va', 64, 64, None),
        ('r_key', 32, 32, None),
        ('dmalen', 32, 0, None),
    )),
    ('atomiceth', 'AtomicETH', 28, False, (
        ('va', 64, 160, None),
        ('r_key', 32, 128, None),
        ('swapdt', 64, 64, None),
        ('cmpdt', 64, 0, None),
    )),
    ('atomicacketh', 'AtomicAckETH', 8, False, (
        ('origremdt', 64, 0, None),
    )),
    ('aeth', 'AETH', 4, False, (
        ('syndrome', 8, 24, None),
        ('msn', 24, 0, None),
    )),
    ('immdt', 'ImmDt', 4, False, (
        ('immdt', 32, 0, None),
    )),
    ('ieth', 'IETH', 4, False, (
        ('ieth', 32, 0, None),
    )),
    ('feth', 'FETH', 4, False, (
        ('reserved', 26, 6, None),
        ('sel', 2, 4, None),
        ('plt', 4, 0, None),
    )),
    ('cnppad', 'CNPPad', 16, False, (
        ('reserved', 128, 0, 'bytes'),
    )),
    ('mad', 'MAD', 24, False, (
        ('baseversion', 8, 184, None),
        ('mgmtclass', 8, 176, None),
        ('classversion', 8, 168, None),
        ('method', 8, 160, None),
        ('status', 16, 144, None),
        ('classspecific', 16, 128, None),
        ('transactionid', 64, 64, None),
        ('attributeid', 16, 48, None),
        ('reserved', 16, 32, None),
        ('attributemodifier', 32, 0, None),
    )),
    ('rmpp', 'RMPP', 12, False, (
        ('rmppversion', 8, 88, None),
        ('rmpptype', 8, 80, None),
        ('rresptime', 5, 75, None),
        ('rmppflags', 3, 72, None),
        ('rmppstatus', 8, 64, None),
        ('data1', 32, 32, None),
        ('data2', 32, 0, None),
    )),
    ('cm.local', 'CM Local Communication ID', 232, True, (
        ('cm.localcommid', 32, 1824, None),
    )),
    ('cm.remote', 'CM Remote Communication ID', 232, True, (
        ('cm.remotecommid', 32, 1792, None),
    )),
    ('cm.req', 'CM ConnectRequest', 232, True, (
        ('cm.req.serviceid', 64, 1728, None),
        ('cm.req.localqpn', 24, 1576, None),
        ('cm.req.transpsvctype', 2, 1505, None),
        ('cm.req.startpsn', 24, 1480, None),
        ('cm.req.pppmtu', 4, 1452, None),
    )),
    ('cm.rep', 'CM ConnectReply', 232, True, (
        ('cm.rep.localqpn', 24, 1736, None),
        ('cm.rep.startpsn', 24, 1672, None),
    )),
    ('cm.dreq', 'CM DisconnectRequest', 232, True, (
        ('cm.req.remoteqpneecn', 24, 1768, None),
    )),
)
