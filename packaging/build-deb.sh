#!/usr/bin/env bash
# build-deb.sh VERSION: the appliance as a Debian package, bin/appliance-VERSION_ARCH.deb.
#
# The binary is built with the dpdk and rdma tags (one binary, both cgo
# paths) into bin/appliance; the package carries it as /usr/bin/appliance with
# the systemd units (packaging/systemd), example configurations under
# /etc/appliance (copied from the repository's testdata, so they are the ones
# the tests parse), the --help text of every command, a man page, the metric
# list and the Grafana dashboard. Depends are computed by dpkg-shlibdeps from
# the libraries the binary links (libibverbs, DPDK's librte-*). Every unit is
# checked with systemd-analyze verify against a root holding the staged files.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
GO=${GO:-go}
raw=${1:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
# Debian versions start with a digit: untagged builds become 0~gitDATE.HASH.
if [[ $raw =~ ^v?[0-9]+\.[0-9] ]]; then
	debver=${raw#v}
else
	debver="0~git$(git log -1 --format=%cd --date=format:%Y%m%d 2>/dev/null || date +%Y%m%d).${raw}"
fi
debver=${debver//[^A-Za-z0-9.+~-]/.}
debver=${debver//-/.}
arch=$(dpkg --print-architecture)
out="bin/appliance_${debver}_${arch}.deb"

need() { command -v "$1" >/dev/null || missing+=("$2"); }
missing=()
need dpkg-deb dpkg
need dpkg-shlibdeps dpkg-dev
need systemd-analyze systemd
pkg-config --exists libdpdk 2>/dev/null || missing+=(libdpdk-dev pkg-config)
[ -f /usr/include/infiniband/verbs.h ] || missing+=(libibverbs-dev)
if [ ${#missing[@]} -gt 0 ]; then
	echo "installing: ${missing[*]}"
	apt-get update -q >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

echo "== building bin/appliance (tags dpdk,rdma, version $raw)"
$GO build -tags dpdk,rdma -ldflags "-X github.com/rdma-appliance/appliance/appliance/cli.version=$raw" \
	-o bin/appliance ./appliance/cmd/appliance

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/root
install -D -m 0755 bin/appliance "$root/usr/bin/appliance"
install -d "$root/lib/systemd/system"
install -m 0644 packaging/systemd/*.service "$root/lib/systemd/system/"

# Example configurations: the repository's own, which its tests parse.
install -D -m 0644 p4/luminatofino/testdata/listing2_injector.yml "$root/etc/appliance/injector.yml"
install -D -m 0644 translator/dtatranslator/testdata/translator.yml "$root/etc/appliance/translator.yml"
install -D -m 0644 collector/dtacollector/testdata/collector.yml "$root/etc/appliance/collector.yml"
install -D -m 0644 packaging/etc/default/appliance "$root/etc/default/appliance"
install -D -m 0644 packaging/etc/dump@.env.example "$root/etc/appliance/dump@.env.example"

doc=$root/usr/share/doc/appliance
echo "== rendering the docs"
packaging/render-docs.sh "$root/usr/bin/appliance" "$stage/docs" >/dev/null
install -d "$doc/commands"
install -m 0644 "$stage"/docs/commands/*.txt "$doc/commands/"
install -m 0644 "$stage/docs/metrics.md" README.md "$doc/"
install -D -m 0644 packaging/grafana/appliance.json "$root/usr/share/appliance/grafana/appliance.json"
install -D -m 0644 packaging/debian/copyright "$doc/copyright"
install -d "$root/usr/share/man/man1"
gzip -9n <"$stage/docs/appliance.1" >"$root/usr/share/man/man1/appliance.1.gz"
gzip -9n <packaging/debian/changelog >"$doc/changelog.gz"

echo "== control files"
install -d "$root/DEBIAN"
(
	cd "$stage"
	mkdir -p debian
	printf 'Source: appliance\n\nPackage: appliance\nArchitecture: any\n' >debian/control
	dpkg-shlibdeps -O -e root/usr/bin/appliance 2>/dev/null
) >"$stage/shlibs"
depends=$(sed -n 's/^shlibs:Depends=//p' "$stage/shlibs")
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$debver/" -e "s/@ARCH@/$arch/" -e "s/@DEPENDS@/$depends/" -e "s/@SIZE@/$size/" \
	packaging/debian/control.in >"$root/DEBIAN/control"
install -m 0644 packaging/debian/conffiles "$root/DEBIAN/conffiles"
install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$root/DEBIAN/"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"

echo "== systemd-analyze verify"
packaging/verify-units.sh "$root"

mkdir -p bin
dpkg-deb --root-owner-group -Zxz -z6 --build "$root" "$out" >/dev/null
ln -sf "$(basename "$out")" bin/appliance.deb
echo "== $out"
dpkg-deb --info "$out" | sed -n '/Package:/,$p'
echo "files: $(dpkg-deb --contents "$out" | wc -l)"
