module github.com/rdma-appliance/appliance

go 1.26.0

require (
	github.com/Mellanox/rdmamap v1.1.0
	github.com/gopacket/gopacket v1.7.7
	github.com/klauspost/compress v1.20.3
	github.com/valyala/bytebufferpool v1.0.0
	github.com/yerden/go-dpdk v0.0.8
	golang.org/x/crypto v0.58.0
	golang.org/x/sys v0.49.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/vishvananda/netlink v1.1.0 // indirect
	github.com/vishvananda/netns v0.0.0-20211101163701-50045581ed74 // indirect
)
