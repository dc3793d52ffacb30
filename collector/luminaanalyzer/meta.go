// Package luminaanalyzer holds Lumina's analyzers: they read the merged trace of
// a test (dumper/trace) with the test's metadata and report how the RNICs
// behaved: Go-back-N compliance, retransmission latencies, timeouts, CNP
// pacing, counters and message completion times.
package luminaanalyzer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rdma-appliance/appliance/internal/intent"
	"github.com/rdma-appliance/appliance/internal/mirror"
)

// Files of one run's result directory (result-path/<timestamp>/<repeat>/).
const (
	MetaFile      = "meta.json"      // Meta
	TraceFile     = "trace.pcap"     // the merged trace, unless Meta.Trace names another
	AnalysisFile  = "analysis.json"  // the analyzers' Report
	ReportFile    = "report.html"    // the self-contained HTML report
	SummaryFile   = "summary.txt"    // the text summary
	IntegrityFile = "integrity.json" // dumper/trace's Report
)

// Meta is what the orchestrator knows about a run besides the trace.
type Meta struct {
	// Test names the test file; Repeat is the repeat index from 0.
	Test   string `json:"test"`
	Repeat int    `json:"repeat"`
	// Trace is the merged trace's file name in the run directory.
	Trace string `json:"trace"`
	// Geometry and Conns are the traffic and its connections (requester
	// and responder IP, QPN, initial PSN), in QP order.
	Geometry intent.Geometry `json:"geometry"`
	Conns    []intent.Conn   `json:"connections"`
	TxDepth  int             `json:"tx_depth"`
	// Timeout and RetryCnt are the QPs' min-retransmit-timeout (IB
	// exponent) and max-retransmit-retry.
	Timeout  uint8 `json:"timeout"`
	RetryCnt uint8 `json:"retry_cnt"`
	// Intents and Entries are the events asked for and the injector's
	// entries compiled from them; Hits counts each entry's matches.
	Intents []intent.Intent `json:"intents"`
	Entries []intent.Entry  `json:"entries"`
	Hits    []uint64        `json:"hits"`
	// Injector holds the injector's counters at the end of the run.
	Injector mirror.InjectorStats `json:"injector"`
	// Requester and Responder are the RNICs' counters (mlx5 names): the
	// difference over the run.
	Requester map[string]uint64 `json:"requester_counters"`
	Responder map[string]uint64 `json:"responder_counters"`
	// RNIC describes the RNICs' configuration as the test set it
	// (nic.type and roce-parameters): the analyzers compare it with what
	// the trace shows.
	RequesterNIC NICConfig `json:"requester_nic"`
	ResponderNIC NICConfig `json:"responder_nic"`
	// MCT is each QP's message completion times in nanoseconds, from the
	// traffic generator.
	MCT [][]int64 `json:"mct_ns"`
	// Valid is false when the trace failed its integrity check: analyzers
	// then report nothing as valid.
	Valid         bool   `json:"valid"`
	IntegrityNote string `json:"integrity_note,omitempty"`
}

// NICConfig is an RNIC's configuration as a Lumina test states it.
type NICConfig struct {
	Type               string `json:"type"` // CX4, CX5, CX6, E810
	DCQCNRPEnable      bool   `json:"dcqcn_rp_enable"`
	DCQCNNPEnable      bool   `json:"dcqcn_np_enable"`
	MinTimeBetweenCNPs int64  `json:"min_time_between_cnps_ns"`
	AdaptiveRetrans    bool   `json:"adaptive_retrans"`
	SlowRestart        bool   `json:"slow_restart"`
}

// ReadMeta reads dir/meta.json.
func ReadMeta(dir string) (*Meta, error) {
	b, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if err != nil {
		return nil, err
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, MetaFile), err)
	}
	if m.Trace == "" {
		m.Trace = TraceFile
	}
	return &m, nil
}

// WriteMeta writes dir/meta.json.
func WriteMeta(dir string, m *Meta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, MetaFile), append(b, '\n'), 0o644)
}
