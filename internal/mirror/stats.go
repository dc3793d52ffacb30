package mirror

// PortStats are the counters of one injector port (the injector's
// PortCounters at one moment).
type PortStats struct {
	Name      string `json:"name"`
	Role      string `json:"role"` // "traffic" or "mirror"
	RxPackets uint64 `json:"rx_packets"`
	RxRoCE    uint64 `json:"rx_roce"`
	TxPackets uint64 `json:"tx_packets"`
	TxDropped uint64 `json:"tx_dropped"`
	Mirrored  uint64 `json:"mirrored"`
	Dropped   uint64 `json:"event_drop"`
	ECNMarked uint64 `json:"event_ecn"`
	Corrupted uint64 `json:"event_corrupt"`
	ARPReply  uint64 `json:"arp_replies"`
	NoRoute   uint64 `json:"no_route"`
	Malformed uint64 `json:"malformed"`
	TTLExpire uint64 `json:"ttl_expired"`
}

// Stats are the injector's counters: what the integrity check compares the
// trace with.
type InjectorStats struct {
	// RxRoCE is every RoCE packet received on the traffic ports; Mirrored
	// the mirrored copies made (the last mirror sequence number). They are
	// equal unless a RoCE packet failed to parse past the UDP header.
	RxRoCE   uint64      `json:"rx_roce"`
	Mirrored uint64      `json:"mirrored"`
	Ports    []PortStats `json:"ports"`
}
