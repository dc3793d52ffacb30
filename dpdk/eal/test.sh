#!/bin/sh
# Tests the eal driver against DPDK 22.11 vdevs (net_ring, net_null,
# net_af_packet) without huge pages, and the pure-Go stub; BENCH=1 adds the
# benchmarks, including io forwarding side by side with dpdk-testpmd.
set -eu
cd "$(dirname "$0")/../.."
if ! pkg-config --exists libdpdk 2>/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libdpdk-dev dpdk-dev pkg-config
	else
		echo "need DPDK 22.11: apt-get install libdpdk-dev dpdk-dev pkg-config" >&2
		exit 1
	fi
fi
go vet -tags dpdk ./dpdk/eal/
go test -tags dpdk -count=1 ./dpdk/eal/
CGO_ENABLED=0 go vet ./dpdk/eal/
CGO_ENABLED=0 go test -count=1 ./dpdk/eal/
if [ "${BENCH:-0}" = 1 ]; then
	go test -tags dpdk -run '^$' -bench . -benchtime 2s ./dpdk/eal/
fi
