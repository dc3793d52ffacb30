package hostmesh

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"

	"github.com/rdma-appliance/appliance/collector/hostmeshanalyzer"
	"github.com/rdma-appliance/appliance/internal/service"
)

// Uploader sends batches to the analyzer over HTTP (POST /v1/results). A
// batch that cannot be delivered is kept and retried with the next, up to
// MaxResults results held; beyond that the oldest batches are dropped and
// counted, so an analyzer that is down costs bounded memory and never
// stops the probing. Batches are also appended to File when set (JSON, one
// per line: what `appliance mesh analyze FILE` reads).
type Uploader struct {
	Client     *service.Client // nil: no analyzer
	File       io.Writer
	MaxResults int

	mu      sync.Mutex
	pending []hostmeshanalyzer.Batch
	held    int
	// Counters: batches delivered, failed attempts, results dropped over
	// the bound.
	Delivered, Failures, Dropped uint64
	LastError                    string
}

// NewUploader posts to the analyzer at addr ("" for none).
func NewUploader(addr string, maxResults int) *Uploader {
	u := &Uploader{MaxResults: maxResults}
	if addr != "" {
		if !strings.Contains(addr, "://") {
			addr = "http://" + addr
		}
		u.Client = service.NewClient(addr)
	}
	if u.MaxResults <= 0 {
		u.MaxResults = 100000
	}
	return u
}

// Push queues a batch and delivers what is queued.
func (u *Uploader) Push(ctx context.Context, b hostmeshanalyzer.Batch) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.File != nil {
		if err := json.NewEncoder(u.File).Encode(&b); err != nil {
			return err
		}
	}
	if u.Client == nil {
		return nil
	}
	u.pending = append(u.pending, b)
	u.held += batchSize(&b)
	for u.held > u.MaxResults && len(u.pending) > 1 {
		u.held -= batchSize(&u.pending[0])
		u.Dropped += uint64(batchSize(&u.pending[0]))
		u.pending = u.pending[1:]
	}
	for len(u.pending) > 0 {
		if err := u.Client.Do(ctx, "POST", hostmeshanalyzer.ResultsPath, &u.pending[0], nil); err != nil {
			u.Failures++
			u.LastError = err.Error()
			return err
		}
		u.Delivered++
		u.held -= batchSize(&u.pending[0])
		u.pending = u.pending[1:]
	}
	u.LastError = ""
	return nil
}

// batchSize is what a batch counts against MaxResults: its results, and
// the records of a switch poller's batch (which has no results, and would
// otherwise pile up without bound while the analyzer is down).
func batchSize(b *hostmeshanalyzer.Batch) int { return len(b.Results) + len(b.PGDrops) }

// SetAnalyzer points the uploader at another analyzer address.
func (u *Uploader) SetAnalyzer(addr string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u.Client = service.NewClient(addr)
}

// UploadStats are the uploader's counters.
type UploadStats struct {
	Delivered, Failures, Dropped uint64
	Held                         int
	LastError                    string
}

// Stats are the counters now.
func (u *Uploader) Stats() UploadStats {
	u.mu.Lock()
	defer u.mu.Unlock()
	return UploadStats{u.Delivered, u.Failures, u.Dropped, u.held, u.LastError}
}

// Held is how many results wait for the analyzer.
func (u *Uploader) Held() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.held
}
