"""The guest image, from Debian packages alone: a stock kernel and an initramfs.

The kernel package is fetched with ``apt-get download`` and unpacked with ``dpkg-deb -x``
(never installed on the host: that would rebuild the host's initrd). The initramfs holds an
``mmdebstrap --variant=essential`` root file system with rdma-core and the RDMA tools, the
kernel modules soft-RoCE needs (``rdma_rxe`` and its dependencies, ``crc32_generic``, which
rxe uses through the crypto API without declaring it, virtio-net, ``sch_netem``) and the
``/init`` of :mod:`guest_init`.

The result is cached under ``$XDG_CACHE_HOME/ibwire-rig`` (else ``~/.cache/ibwire-rig``) in a
directory named by a hash of the package versions and of the init script: a change of either
builds a new image (images unused for two weeks are removed after a build). A build happens in a temporary directory renamed into place at the end,
so a half-built image is never used.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .guest_init import INIT_SCRIPT

#: What the guest runs; its dependencies come with them.
ROOTFS_PACKAGES = ("rdma-core", "ibverbs-providers", "ibverbs-utils", "rdmacm-utils",
                   "perftest", "iproute2", "kmod", "procps", "mount")
#: Loaded by /init; their dependencies (modules.dep) are copied too.
MODULES = ("crc32_generic", "virtio_pci", "virtio_net", "rdma_rxe", "rdma_ucm", "ib_uverbs",
           "ib_umad", "sch_netem")
KERNEL_META = "linux-image-amd64"
#: Names another kernel package to boot instead (``linux-image-6.12.118+deb12-amd64``, say:
#: a finding checked against a newer kernel); its image is cached apart.
KERNEL_ENV = "IBWIRE_RIG_KERNEL"
#: Bumped when the image's layout changes in a way the versions do not show.
FORMAT = 1
#: Files of the root file system nobody reads in the guest.
EXCLUDED = ("/usr/share/man/*", "/usr/share/doc/*", "/usr/share/locale/*", "/usr/share/info/*",
            "/usr/share/lintian/*", "/usr/share/zoneinfo/*")


class BuildError(RuntimeError):
    """The guest could not be built (a tool missing, a download or mmdebstrap failed)."""


@dataclass(frozen=True)
class Image:
    """A built guest: the kernel, the initramfs and what they were made of."""

    directory: Path
    kernel: Path
    initrd: Path
    manifest: dict

    @property
    def kernel_release(self) -> str:
        return str(self.manifest["kernel_release"])


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "ibwire-rig"


def _run(args: list[str], **kwargs: object) -> str:
    try:
        done = subprocess.run(args, check=True, capture_output=True, text=True,
                              **kwargs)  # type: ignore[call-overload]
    except FileNotFoundError as exc:
        raise BuildError(f"{args[0]} is not installed") from exc
    except subprocess.CalledProcessError as exc:
        tail = "\n".join((exc.stderr or exc.stdout or "").strip().splitlines()[-15:])
        raise BuildError(f"{' '.join(args[:3])} ... failed ({exc.returncode}):\n{tail}") from exc
    return done.stdout


def kernel_package() -> str:
    """The kernel package ``$IBWIRE_RIG_KERNEL`` names, else the one the distribution's
    meta-package points at."""
    chosen = os.environ.get(KERNEL_ENV, "").strip()
    if chosen:
        if not re.fullmatch(r"linux-image-[\w.+~-]+", chosen):
            raise BuildError(f"{KERNEL_ENV}={chosen!r} is not a kernel package name "
                             "(linux-image-...)")
        return chosen
    out = _run(["apt-cache", "depends", KERNEL_META])
    found = re.findall(r"Depends:\s*(linux-image-\S+)", out)
    if not found:
        raise BuildError(f"apt-cache knows no kernel behind {KERNEL_META}: run apt-get update")
    return found[0]


def candidate_versions(packages: list[str]) -> dict[str, str]:
    """apt's candidate version of each package (one apt-cache run for all)."""
    out = _run(["apt-cache", "policy", *packages])
    found = dict(re.findall(r"^(\S+):\n\s+Installed:.*\n\s+Candidate:\s*(\S+)", out, re.M))
    missing = [p for p in packages if found.get(p, "(none)") == "(none)"]
    if missing:
        raise BuildError(f"apt knows no version of {', '.join(missing)}: run apt-get update")
    return {p: found[p] for p in packages}


def wanted() -> dict:
    """What an image built now would be made of; its hash names the cache entry."""
    kernel = kernel_package()
    versions = candidate_versions([kernel, *ROOTFS_PACKAGES])
    return {"format": FORMAT, "kernel_package": kernel,
            "kernel_release": kernel.removeprefix("linux-image-"), "versions": versions,
            "modules": list(MODULES),
            "init_sha256": hashlib.sha256(INIT_SCRIPT.encode()).hexdigest()}


def key_of(spec: dict) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def cached(spec: dict | None = None) -> Image | None:
    spec = spec or wanted()
    directory = cache_root() / key_of(spec)
    return _image(directory) if (directory / "manifest.json").exists() else None


def _image(directory: Path) -> Image:
    manifest = json.loads((directory / "manifest.json").read_text())
    return Image(directory, directory / "vmlinuz", directory / "initrd.img", manifest)


def build(force: bool = False, log: bool = False) -> Image:
    """The cached image for the current package versions, built first if missing."""
    spec = wanted()
    root = cache_root()
    target = root / key_of(spec)
    if not force and (target / "manifest.json").exists():
        os.utime(target / "manifest.json")  # in use: see _prune
        return _image(target)
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(".build-*"):  # an interrupted build of an earlier run
        if time.time() - stale.stat().st_mtime > 3600:
            shutil.rmtree(stale, ignore_errors=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        timings = _build_into(work, spec, log)
        manifest = {**spec, "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "timings_s": timings,
                    "initrd_bytes": (work / "initrd.img").stat().st_size}
        (work / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        for scratch in ("deb", "kernel", "rootfs"):
            shutil.rmtree(work / scratch, ignore_errors=True)
        if target.exists():
            shutil.rmtree(target)
        os.rename(work, target)  # atomic: the entry appears complete or not at all
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    _prune(root, keep=target)
    return _image(target)


def _prune(root: Path, keep: Path, unused_days: float = 14.0) -> None:
    """Remove images not used for ``unused_days`` (about 60 MB each)."""
    for entry in root.iterdir():
        manifest = entry / "manifest.json"
        if entry != keep and manifest.exists() and \
                time.time() - manifest.stat().st_mtime > unused_days * 86400:
            shutil.rmtree(entry, ignore_errors=True)


def _say(log: bool, text: str) -> None:
    if log:
        print(f"rxe_rig build: {text}", flush=True)


def _build_into(work: Path, spec: dict, log: bool) -> dict[str, float]:
    timings: dict[str, float] = {}
    start = time.monotonic()
    _say(log, f"kernel {spec['kernel_package']} {spec['versions'][spec['kernel_package']]}")
    kernel_dir = _fetch_kernel(work, spec["kernel_package"])
    timings["kernel"] = time.monotonic() - start
    start = time.monotonic()
    _say(log, "root file system (mmdebstrap)")
    rootfs = work / "rootfs"
    _mmdebstrap(rootfs, spec["versions"])
    timings["rootfs"] = time.monotonic() - start
    start = time.monotonic()
    _say(log, "modules and initramfs")
    release = spec["kernel_release"]
    shutil.copy2(kernel_dir / "boot" / f"vmlinuz-{release}", work / "vmlinuz")
    _install_modules(kernel_dir, rootfs, release)
    init = rootfs / "init"
    init.write_text(INIT_SCRIPT)
    init.chmod(0o755)
    _pack(rootfs, work / "initrd.img", kernel_dir / "boot" / f"config-{release}")
    timings["initramfs"] = time.monotonic() - start
    return timings


def _fetch_kernel(work: Path, package: str) -> Path:
    debs = work / "deb"
    debs.mkdir()
    debs.chmod(0o777)  # apt-get download drops to the _apt user where it can
    _run(["apt-get", "download", "-q", package], cwd=debs)
    found = list(debs.glob("*.deb"))
    if len(found) != 1:
        raise BuildError(f"apt-get download {package} gave {len(found)} files")
    kernel_dir = work / "kernel"
    _run(["dpkg-deb", "-x", str(found[0]), str(kernel_dir)])
    return kernel_dir


def _sources() -> list[str]:
    """The host's Debian sources, so that mmdebstrap uses the host's mirror."""
    for path in ("/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"):
        if Path(path).is_file() and Path(path).read_text().strip():
            return [path]
    return []


def _suite() -> str:
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip('"')
    return "bookworm"


def _mmdebstrap(rootfs: Path, versions: dict[str, str]) -> None:
    args = ["mmdebstrap", "--variant=essential", "--mode=root", "-q",
            "--include=" + ",".join(ROOTFS_PACKAGES)]
    args += [f"--dpkgopt=path-exclude={p}" for p in EXCLUDED]
    args += ["--dpkgopt=path-include=/usr/share/doc/*/copyright",
             "--customize-hook=rm -rf \"$1\"/var/cache/apt/* \"$1\"/var/lib/apt/lists/*"]
    args += [_suite(), str(rootfs), *_sources()]
    _run(args)
    # the versions the key names are the ones installed
    status = (rootfs / "var/lib/dpkg/status").read_text()
    for package in ROOTFS_PACKAGES:
        match = re.search(rf"^Package: {re.escape(package)}\n(?:.+\n)*?Version: (\S+)", status,
                          re.M)
        if match is None or match.group(1) != versions[package]:
            raise BuildError(f"mmdebstrap installed {package} "
                             f"{match.group(1) if match else 'nothing'}, "
                             f"apt-cache said {versions[package]}")


def _module_closure(modules_dir: Path) -> list[str]:
    """The module files (relative paths) for MODULES and all they depend on."""
    deps: dict[str, list[str]] = {}
    for line in (modules_dir / "modules.dep").read_text().splitlines():
        path, _, rest = line.partition(":")
        deps[path] = rest.split()
    by_name = {re.sub(r"\.ko(\.\w+)?$", "", Path(p).name).replace("-", "_"): p for p in deps}
    builtin = (modules_dir / "modules.builtin").read_text()
    wanted: list[str] = []
    for name in MODULES:
        if name not in by_name:
            if f"/{name}.ko" in builtin:
                continue
            raise BuildError(f"module {name} is in neither modules.dep nor modules.builtin")
        todo = [by_name[name]]
        while todo:
            path = todo.pop()
            if path not in wanted:
                wanted.append(path)
                todo.extend(deps[path])
    return wanted


def _install_modules(kernel_dir: Path, rootfs: Path, release: str) -> None:
    source = kernel_dir / "lib" / "modules" / release
    _run(["depmod", "-b", str(kernel_dir), release])
    target = rootfs / "lib" / "modules" / release
    target.mkdir(parents=True)
    for relative in _module_closure(source):
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / relative, target / relative)
    for name in ("modules.order", "modules.builtin", "modules.builtin.modinfo"):
        if (source / name).exists():
            shutil.copy2(source / name, target / name)
    _run(["depmod", "-b", str(rootfs), release])


def _pack(rootfs: Path, out: Path, config: Path) -> None:
    """A newc cpio of the tree, zstd-compressed where the kernel takes it (faster to unpack
    in an emulated guest), else gzip."""
    zstd = "CONFIG_RD_ZSTD=y" in config.read_text() and shutil.which("zstd")
    compress = ["zstd", "-q", "-T0", "-3"] if zstd else ["gzip", "-1"]
    names = _run(["find", ".", "-mindepth", "1"], cwd=rootfs)
    with open(out, "wb") as sink:
        cpio = subprocess.Popen(["cpio", "-o", "-H", "newc", "--quiet", "-R", "0:0"],
                                cwd=rootfs, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        squeeze = subprocess.Popen(compress, stdin=cpio.stdout, stdout=sink)
        assert cpio.stdin is not None and cpio.stdout is not None
        cpio.stdout.close()
        cpio.stdin.write(names.encode())
        cpio.stdin.close()
        if cpio.wait() != 0 or squeeze.wait() != 0:
            raise BuildError("packing the initramfs failed (cpio/compressor)")
