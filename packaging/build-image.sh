#!/usr/bin/env bash
# build-image.sh DEB OUT.tar.gz: a Debian root filesystem with the appliance
# package installed, as a tarball an operator can chroot into, run under
# systemd-nspawn, or put on a disk with a kernel of their choosing (the image
# carries systemd as init, no kernel, so the host's or the PXE setup's fits).
#
# debootstrap (minbase plus systemd) fetches from Debian's mirror (MIRROR,
# default deb.debian.org); downloaded packages are kept in
# /var/cache/appliance-image so a rebuild fetches nothing new. The package is
# installed with apt inside the root so its Depends (libibverbs, DPDK's
# libraries) are resolved the way an operator's install would. The result is
# then checked by check-image.sh.
set -euo pipefail
deb=${1:?usage: build-image.sh DEB OUT.tar.gz}
out=${2:?usage: build-image.sh DEB OUT.tar.gz}
here=$(cd "$(dirname "$0")" && pwd)
suite=${SUITE:-bookworm}
mirror=${MIRROR:-http://deb.debian.org/debian}
cache=${CACHE:-/var/cache/appliance-image}
[ "$(id -u)" = 0 ] || { echo "build-image.sh: debootstrap and chroot need root" >&2; exit 1; }
command -v debootstrap >/dev/null || {
	apt-get update -q >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >/dev/null
}
deb=$(readlink -f "$deb")
mkdir -p "$cache/debs" "$(dirname "$out")"
out=$(readlink -f "$out")
work=$(mktemp -d /var/tmp/appliance-image.XXXXXX)
root=$work/root
cleanup() {
	for m in dev/pts dev proc sys; do mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m"; done
	rm -rf "$work"
}
trap cleanup EXIT

echo "== debootstrap $suite (minbase + systemd) from $mirror"
debootstrap --variant=minbase --include=systemd,systemd-sysv,iproute2,kmod,pciutils,ca-certificates \
	--cache-dir="$cache/debs" "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
	tail -20 "$work/debootstrap.log"
	exit 1
}

echo "== installing $(basename "$deb")"
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
mount -t sysfs sysfs "$root/sys"
# No daemon starts inside the build's chroot.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
cp "$deb" "$root/tmp/appliance.deb"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
chroot "$root" apt-get update -q >/dev/null
chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
	-o Dir::Cache::archives=/var/cache/apt/archives /tmp/appliance.deb >"$work/install.log" 2>&1 || {
	tail -30 "$work/install.log"
	exit 1
}
chroot "$root" apt-get clean
rm -f "$root/tmp/appliance.deb" "$root/usr/sbin/policy-rc.d"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
echo appliance >"$root/etc/hostname"
for m in sys dev proc; do umount -l "$root/$m"; done

echo "== $out"
tar --numeric-owner --xattrs -C "$root" -czf "$out" .
du -h "$out" | cut -f1 | sed 's/^/size: /'
"$here/check-image.sh" "$out"
