package capture

import (
	"strconv"

	"github.com/rdma-appliance/appliance/internal/metrics"
	"github.com/rdma-appliance/appliance/internal/service"
)

// Register exports the session's counters on the service's /metrics and
// a health check that fails once the writer has failed.
func (s *Session) Register(svc *service.Service) {
	type field struct {
		name, help string
		get        func(Stats) uint64
	}
	for _, f := range []field{
		{"received_packets_total", "Frames the capture received (after a kernel filter).", func(st Stats) uint64 { return st.Received }},
		{"received_bytes_total", "Wire bytes of the frames received.", func(st Stats) uint64 { return st.Bytes }},
		{"written_packets_total", "Frames handed to the output files.", func(st Stats) uint64 { return st.Written }},
		{"filtered_packets_total", "Frames the filter rejected in user space.", func(st Stats) uint64 { return st.Filtered }},
		{"roce_rejected_packets_total", "Frames the RoCE filter rejected.", func(st Stats) uint64 { return st.RoCERejected }},
	} {
		svc.Metrics.CounterFunc("appliance_capture_"+f.name, f.help, func() float64 { return float64(f.get(s.Stats())) })
	}
	svc.Metrics.Collect("appliance_capture_dropped_packets_total", "Frames lost, by where: the kernel ring, the port, the writer.",
		metrics.CounterType, []string{"where"}, func(emit func(metrics.Sample)) {
			st := s.Stats()
			emit(metrics.Sample{Labels: []string{"kernel"}, Value: float64(st.KernelDrops)})
			emit(metrics.Sample{Labels: []string{"port"}, Value: float64(st.PortDrops)})
			emit(metrics.Sample{Labels: []string{"writer"}, Value: float64(st.WriterDrops)})
		})
	type qpField struct {
		name, help string
		get        func(QPStats) uint64
	}
	for _, f := range []qpField{
		{"qp_packets_total", "RoCEv2 packets per destination GID and QPN.", func(q QPStats) uint64 { return q.Packets }},
		{"qp_retransmissions_total", "Requests seen at or behind a PSN already seen, per QP.", func(q QPStats) uint64 { return q.Retransmissions }},
		{"qp_naks_total", "NAKs per QP.", func(q QPStats) uint64 { return q.NAKs }},
		{"qp_cnps_total", "CNPs per QP.", func(q QPStats) uint64 { return q.CNPs }},
		{"qp_ecn_marked_total", "CE-marked RoCEv2 packets per QP.", func(q QPStats) uint64 { return q.ECNMarked }},
	} {
		svc.Metrics.Collect("appliance_capture_"+f.name, f.help, metrics.CounterType, []string{"dst_gid", "qpn"},
			func(emit func(metrics.Sample)) {
				for _, q := range s.QPs() {
					emit(metrics.Sample{Labels: []string{q.DstGID, strconv.FormatUint(uint64(q.QPN), 10)}, Value: float64(f.get(q))})
				}
			})
	}
	svc.AddCheck("writer", func() error {
		if !s.isRunning() {
			return nil
		}
		for _, sk := range s.sinks {
			if err := sk.err(); err != nil {
				return err
			}
		}
		return nil
	})
}
