package soft

import "sync/atomic"

// Counter identifies a device counter. The names are those of mlx5's
// hw_counters and port counters (what `rdma statistic` and ethtool show), so
// Lumina's counter analyzer reads the soft RNIC like a ConnectX.
type Counter int

// Counters.
const (
	CntRxPackets Counter = iota // RoCE packets received (all, before checks)
	CntRxBytes
	CntTxPackets // packets transmitted (RoCE, CNP and ARP)
	CntTxBytes
	CntNpCnpSent              // np_cnp_sent: CNPs sent by the notification point
	CntNpECNMarkedRocePackets // np_ecn_marked_roce_packets: CE-marked packets received
	CntRpCnpHandled           // rp_cnp_handled: CNPs acted on by the reaction point
	CntRpCnpIgnored           // rp_cnp_ignored: CNPs received with DCQCN off
	CntOutOfSequence          // out_of_sequence: NAK sequence errors the responder sent (one per gap, as mlx5; UC: gaps seen)
	CntPacketSeqErr           // packet_seq_err: requester received a NAK sequence error
	CntLocalAckTimeoutErr     // local_ack_timeout_err: retransmission timer expired
	CntImpliedNakSeqErr       // implied_nak_seq_err: READ/atomic response gap detected by the requester
	CntRxICRCEncapsulated     // rx_icrc_encapsulated: packets dropped for a bad ICRC
	CntDuplicateRequest       // duplicate_request: responder received an already executed request
	CntRNRNakRetryErr         // rnr_nak_retry_err: RNR retries exhausted
	CntReqCQEError            // req_cqe_error: requester error completions (flushes excluded)
	CntRespCQEError           // resp_cqe_error: responder error completions (flushes excluded)
	CntReqCQEFlushError       // req_cqe_flush_error
	CntRespCQEFlushError      // resp_cqe_flush_error
	CntOutOfBuffer            // out_of_buffer: SEND arrived with no receive posted
	CntRNRNakSent             // RNR NAKs sent (rxe: rcvd_rnr_err on the peer)
	CntRxRNRNak               // RNR NAKs received
	CntRxDiscards             // malformed or undeliverable packets dropped (rx_discards_phy)
	CntRxWrongQP              // packets for an unknown QP or a QP in a state that ignores them
	CntRxQKeyViolation        // UD packets with the wrong Q_Key
	CntRxCNP                  // CNPs received
	CntTxRetransmits          // packets sent again by go-back-N or the timer
	CntTxNoBuf                // transmit buffer allocation failures
	CntARPRequestsSent        // ARP requests sent to resolve a neighbour
	CntARPRepliesSent         // ARP replies sent for our IPv4 GIDs
	CntARPFailed              // neighbours that did not answer after all retries
	CntCQOverflow             // completions lost because a CQ was full
	CntAsyncEventsDropped     // asynchronous events lost because nobody read them
	CntNDSolicitsSent         // IPv6 neighbour solicitations sent to resolve a neighbour
	CntNDAdvertsSent          // IPv6 neighbour advertisements sent for our IPv6 GIDs
	numCounters
)

var counterNames = [numCounters]string{
	"rx_packets", "rx_bytes", "tx_packets", "tx_bytes",
	"np_cnp_sent", "np_ecn_marked_roce_packets", "rp_cnp_handled", "rp_cnp_ignored",
	"out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "implied_nak_seq_err",
	"rx_icrc_encapsulated", "duplicate_request", "rnr_nak_retry_err", "req_cqe_error", "resp_cqe_error",
	"req_cqe_flush_error", "resp_cqe_flush_error", "out_of_buffer", "rnr_nak_sent", "rnr_nak_received",
	"rx_discards", "rx_wrong_qp", "rx_qkey_violation", "rx_cnp", "tx_retransmits", "tx_nobuf",
	"arp_requests_sent", "arp_replies_sent", "arp_failed", "cq_overflow",
	"async_events_dropped", "nd_solicits_sent", "nd_adverts_sent",
}

// String returns the counter's mlx5-style name.
func (c Counter) String() string {
	if c >= 0 && c < numCounters {
		return counterNames[c]
	}
	return "unknown"
}

// counters are written by the poll loop and read by anyone. Each is an
// atomic so a reader never tears one, but they are not a consistent snapshot
// of each other (neither are a NIC's).
type counters [numCounters]atomic.Uint64

func (c *counters) inc(id Counter)           { c[id].Add(1) }
func (c *counters) add(id Counter, n uint64) { c[id].Add(n) }
func (c *counters) get(id Counter) uint64    { return c[id].Load() }
func (c *counters) snapshot() map[string]uint64 {
	m := make(map[string]uint64, numCounters)
	for i := range c {
		m[counterNames[i]] = c[i].Load()
	}
	return m
}
