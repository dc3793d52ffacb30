#!/usr/bin/env bash
# check-image.sh IMAGE.tar.gz: unpack the image, chroot into it and check
# that the package works there: appliance version, appliance lab --help,
# appliance doctor (its verdict is the host's, shown, not judged),
# systemd-analyze verify on every unit, the example configurations and the
# installed package's state.
set -euo pipefail
img=${1:?usage: check-image.sh IMAGE.tar.gz}
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "check-image.sh: chroot needs root" >&2; exit 1; }
root=$(mktemp -d /var/tmp/appliance-check.XXXXXX)
cleanup() {
	for m in dev proc sys; do mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m"; done
	rm -rf "$root"
}
trap cleanup EXIT
tar --numeric-owner -xzf "$img" -C "$root"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --bind /dev "$root/dev"
cp "$here/verify-units.sh" "$root/tmp/verify-units.sh"
inroot() { echo "# chroot: $*"; chroot "$root" "$@"; }
inroot appliance version
inroot appliance lab --help 2>&1 | sed -n 1,3p # reads it all: head would end the pipe early (SIGPIPE under pipefail)
echo "..."
inroot dpkg-query -W -f='${Package} ${Version} ${Status}\n' appliance
inroot ls /etc/appliance /lib/systemd/system/ | grep -E '^(/|appliance|injector|translator|collector|dump)'
inroot getent passwd appliance
inroot /tmp/verify-units.sh
echo "# chroot: appliance doctor (the host's hardware, seen from the image)"
chroot "$root" appliance doctor | tail -1 || true
rm -f "$root/tmp/verify-units.sh"
echo "image check: OK"
