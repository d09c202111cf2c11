"""The guest's ``/init`` and the wire format of its control channel.

The guest learns its addresses from the kernel command line (``ibrig.addr=``,
``ibrig.addr6=``), loads the modules, brings ``eth0`` up, adds the soft-RoCE device
(``rdma link add rxe0 type rxe netdev eth0``) and then serves the control channel on its
second serial port (``/dev/ttyS1``, a unix socket on the host):

- host -> guest: ``RUN <id> <command>`` (one line: a command has no newline); it runs under
  ``sh -c`` with stdin from /dev/null, stdout and stderr together (two processes per
  command, the shell and base64: each costs tens of milliseconds in an emulated guest);
- guest -> host: the output in base64 lines, then ``IBRIG-END <id> <exit status>``.

Before serving it prints ``IBRIG-READY`` on the channel (and on the console).
"""

from __future__ import annotations

READY = "IBRIG-READY"
END = "IBRIG-END"

INIT_SCRIPT = r"""#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /dev/shm
addr= addr6= mtu=1500
for word in $(cat /proc/cmdline); do
    case "$word" in
        ibrig.addr=*) addr=${word#ibrig.addr=} ;;
        ibrig.addr6=*) addr6=${word#ibrig.addr6=} ;;
        ibrig.mtu=*) mtu=${word#ibrig.mtu=} ;;
    esac
done
# rxe computes its ICRC through the crypto API's crc32 and does not declare the module
for m in crc32_generic virtio_pci virtio_net sch_netem rdma_rxe rdma_ucm ib_uverbs ib_umad; do
    modprobe "$m" || echo "ibrig: modprobe $m failed"
done
i=0
while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
for k in accept_ra router_solicitations; do
    echo 0 > /proc/sys/net/ipv6/conf/default/$k
    echo 0 > /proc/sys/net/ipv6/conf/eth0/$k
done
ip link set lo up
ip link set eth0 mtu "$mtu" up
[ -n "$addr" ] && ip addr add "$addr" dev eth0
[ -n "$addr6" ] && ip -6 addr add "$addr6" dev eth0 nodad
rdma link add rxe0 type rxe netdev eth0 || echo "ibrig: rdma link add failed"
stty -F /dev/ttyS1 raw -echo 2>/dev/null
exec 3<>/dev/ttyS1
echo "IBRIG-READY" >&3
echo "IBRIG-READY"
cd /tmp
while read -r verb id cmd <&3; do
    [ "$verb" = RUN ] || continue
    sh -c "$cmd" < /dev/null > /tmp/.out 2>&1
    rc=$?
    base64 /tmp/.out >&3
    echo "IBRIG-END $id $rc" >&3
done
echo "ibrig: control channel closed"
sync
echo o > /proc/sysrq-trigger
"""
