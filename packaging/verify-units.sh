#!/usr/bin/env bash
# verify-units.sh [ROOT]: systemd-analyze verify on every appliance unit.
#
# Without ROOT (as inside the image) the units are verified where they are
# installed. With ROOT (a staged package tree), they are verified against a
# scratch root holding the host's own units (for the targets they name) and
# the staged binary, since verify checks that ExecStart's binary exists.
# Templates are verified through an instance (appliance-dump@eth1).
# Man pages are not looked up (--man=no): verify runs man(1) on the host's
# database, not the root's; build-deb.sh checks the page itself.
# Each unit's exposure (systemd-analyze security, offline, on the unit file)
# must rate at most SECURITY_THRESHOLD tenths (30: 3.0, "OK").
set -euo pipefail
threshold=${SECURITY_THRESHOLD:-30}
# check_exposure DIR: systemd-analyze security on every unit file in DIR.
check_exposure() {
	local f out
	for f in "$1"/appliance-*.service; do
		if ! out=$(systemd-analyze security --offline=yes --threshold="$threshold" --no-pager "$f" 2>&1); then
			printf '%s\n' "$out" | grep -E '^✗|Overall' >&2
			echo "$(basename "$f"): exposure above $((threshold / 10)).$((threshold % 10)) (SECURITY_THRESHOLD=$threshold)" >&2
			return 1
		fi
		echo "$(basename "$f"): $(printf '%s\n' "$out" | sed -n 's/.*Overall exposure level for [^:]*: //p')"
	done
}
units=()
add_units() {
	local f n
	for f in "$1"/appliance-*.service; do
		n=$(basename "$f")
		[[ $n == *@.service ]] && n=${n%@.service}@eth1.service
		units+=("$n")
	done
}
if [ $# -eq 0 ] || [ "$1" = / ]; then
	add_units /lib/systemd/system
	systemd-analyze verify --man=no "${units[@]}"
	echo "systemd-analyze verify: ${#units[@]} units OK: ${units[*]}"
	check_exposure /lib/systemd/system
	exit 0
fi
staged=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/lib/systemd" "$scratch/etc/systemd/system" "$scratch/usr/bin"
cp -a /lib/systemd/system "$scratch/lib/systemd/"
cp "$staged"/lib/systemd/system/appliance-*.service "$scratch/lib/systemd/system/"
cp "$staged/usr/bin/appliance" "$scratch/usr/bin/"
# The other programs the units run (ExecReload's kill) come from the host,
# in a merged-/usr layout as Debian's.
ln -s usr/bin "$scratch/bin"
for exe in $(sed -n 's|^Exec[A-Za-z]*=[-@:+!]*\(/[^ ]*\).*|\1|p' "$staged"/lib/systemd/system/appliance-*.service | sort -u); do
	[ -e "$scratch$exe" ] || cp "$(readlink -f "$exe")" "$scratch/usr/bin/$(basename "$exe")"
done
# systemd-analyze (252) makes its generator directories under the host's /tmp
# but looks for them under ROOT/tmp.
ln -s /tmp "$scratch/tmp"
add_units "$staged/lib/systemd/system"
systemd-analyze verify --man=no --root="$scratch" "${units[@]}"
echo "systemd-analyze verify: ${#units[@]} units OK: ${units[*]}"
check_exposure "$staged/lib/systemd/system"
if command -v man >/dev/null; then
	man -l "$staged/usr/share/man/man1/appliance.1.gz" 2>&1 >/dev/null | grep . && { echo "man page warnings above"; exit 1; }
	echo "man -l appliance.1.gz: renders"
fi
