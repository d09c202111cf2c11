"""The rig's parts that need no QEMU: the image cache (keyed, atomic), the headers-only cut,
the nftables rules, the guest's control channel."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from ibwire.pcap import PcapWriter, read_capture
from rxe_rig import image
from rxe_rig.capture import cut
from rxe_rig.faults import Drop, Faults
from rxe_rig.guest import Guest
from rxe_rig.guest_init import INIT_SCRIPT

SPEC = {"format": 1, "kernel_package": "linux-image-x", "kernel_release": "x",
        "versions": {"linux-image-x": "1", "rdma-core": "44.0-2"}, "modules": [],
        "init_sha256": "0"}


def test_cache_key_follows_the_versions_and_the_init_script():
    other = json.loads(json.dumps(SPEC))
    assert image.key_of(other) == image.key_of(SPEC)
    other["versions"]["rdma-core"] = "44.0-3"
    assert image.key_of(other) != image.key_of(SPEC)
    other = {**SPEC, "init_sha256": "1"}
    assert image.key_of(other) != image.key_of(SPEC)


def test_another_kernel_is_chosen_by_name_and_a_bad_name_refused(
        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(image.KERNEL_ENV, "linux-image-6.12.118+deb12-amd64")
    assert image.kernel_package() == "linux-image-6.12.118+deb12-amd64"
    monkeypatch.setenv(image.KERNEL_ENV, "linux-image-x; rm -rf /")
    with pytest.raises(image.BuildError, match="not a kernel package name"):
        image.kernel_package()


def test_a_failed_build_leaves_nothing_and_a_finished_one_appears_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(image, "wanted", lambda: SPEC)
    target = tmp_path / "ibwire-rig" / image.key_of(SPEC)

    def broken(work: Path, spec: dict, log: bool) -> dict:
        (work / "vmlinuz").write_bytes(b"half")
        raise image.BuildError("mmdebstrap failed")

    monkeypatch.setattr(image, "_build_into", broken)
    with pytest.raises(image.BuildError):
        image.build()
    assert not target.exists() and image.cached(SPEC) is None
    assert list((tmp_path / "ibwire-rig").iterdir()) == []

    def works(work: Path, spec: dict, log: bool) -> dict:
        assert not target.exists()  # built aside, renamed into place at the end
        (work / "vmlinuz").write_bytes(b"kernel")
        (work / "initrd.img").write_bytes(b"initrd")
        return {"kernel": 0.0}

    monkeypatch.setattr(image, "_build_into", works)
    built = image.build()
    assert built.directory == target and built.kernel.read_bytes() == b"kernel"
    assert image.cached(SPEC) == built
    monkeypatch.setattr(image, "_build_into", broken)
    assert image.build() == built  # cached: not built again


def test_cut_keeps_original_lengths(tmp_path: Path):
    full, headers = tmp_path / "full.pcap", tmp_path / "headers.pcap"
    frames = [bytes(range(256)) * 4, b"\x01" * 60, b"\x02" * 128, b"\x03" * 129]
    with PcapWriter(full, 1) as writer:
        for i, frame in enumerate(frames):
            writer.write(frame, i * 1000)
    assert cut(full, headers, 128) == 2
    data = headers.read_bytes()
    assert struct.unpack_from("<I", data[16:20])[0] == 128 or \
        struct.unpack_from(">I", data[16:20])[0] == 128
    got = [bytes(r.frame) for r in read_capture(headers)]
    assert got == [f[:128] for f in frames]
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    offset, lengths = 24, []
    while offset < len(data):
        incl, orig = struct.unpack_from(order + "II", data, offset + 8)
        lengths.append((incl, orig))
        offset += 16 + incl
    assert lengths == [(min(len(f), 128), len(f)) for f in frames]


def test_fault_rules():
    faults = Faults(loss_percent=2.5, drops=(Drop(nth=(3, 40), opcodes=(6, 10),
                                                  source="10.77.0.2"),))
    rules = faults.ruleset()
    assert "udp dport 4791 numgen random mod 10000 < 250 counter drop" in rules
    assert ("udp dport 4791 ip saddr 10.77.0.2 @th,64,8 { 6, 10 } "
            "numgen inc mod 16777216 { 3, 40 } counter drop") in rules
    assert "table bridge ibrig" in rules and "hook forward" in rules
    assert not Faults().on_bridge and Faults(netem=((2, "delay 1ms"),)).netem
    if shutil.which("nft") and os.geteuid() == 0:  # nftables accepts them (check only)
        done = subprocess.run(["nft", "-c", "-f", "-"], input=rules, text=True,
                              capture_output=True)
        assert done.returncode == 0, done.stderr


def _serve(script: str, sock: socket.socket) -> None:
    """The control loop of /init, over a socket instead of /dev/ttyS1."""
    loop = script[script.index("while read -r verb id cmd"):script.index("echo \"ibrig: control")]
    fd = sock.fileno()
    subprocess.run(["sh", "-c", f'exec 3<&0; echo IBRIG-READY >&3; {loop}'],
                   stdin=fd, stdout=fd, stderr=subprocess.DEVNULL, cwd="/tmp")


@pytest.mark.skipif(shutil.which("base64") is None, reason="no base64 (coreutils)")
def test_control_channel_round_trip(tmp_path: Path):
    """The host side (Guest.run) against the guest's loop from INIT_SCRIPT: output, exit
    status, several commands in turn, stderr with stdout, binary-safe."""
    host, guest_end = socket.socketpair()
    server = threading.Thread(target=_serve, args=(INIT_SCRIPT, guest_end), daemon=True)
    server.start()
    guest = Guest(1, tmp_path)
    guest._sock = host
    guest._check_alive = lambda: None  # type: ignore[method-assign]
    guest.wait_ready(10)
    done = guest.run("echo out; echo err >&2; exit 3", timeout=10)
    assert (done.status, sorted(done.output.split())) == (3, ["err", "out"])
    assert guest.run("printf 'a\\001\\377b'", timeout=10).output == "a\x01\ufffdb"
    assert guest.run("true", timeout=10).ok
    with pytest.raises(ValueError):
        guest.run("echo a\necho b")
    host.close()
    guest_end.close()


def test_images_unused_for_two_weeks_go_after_a_build(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(image, "wanted", lambda: SPEC)
    root = tmp_path / "ibwire-rig"
    for name, age_days in (("old", 15), ("recent", 3)):
        (root / name).mkdir(parents=True)
        (root / name / "manifest.json").write_text("{}")
        past = time.time() - age_days * 86400
        os.utime(root / name / "manifest.json", (past, past))
    (root / "accel.json").write_text("{}")

    def works(work: Path, spec: dict, log: bool) -> dict:
        (work / "vmlinuz").write_bytes(b"kernel")
        (work / "initrd.img").write_bytes(b"initrd")
        return {}

    monkeypatch.setattr(image, "_build_into", works)
    built = image.build()
    assert sorted(p.name for p in root.iterdir()) == sorted(
        ["recent", "accel.json", built.directory.name])
