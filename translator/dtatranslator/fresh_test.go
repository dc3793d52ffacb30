package dtatranslator

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/internal/service"

	"github.com/rdma-appliance/appliance/internal/dtawire"
)

// TestFreshStatus: once the loop has answered, FreshStatus shows it.
// Status publishes every 50 ms, so right after an ARP answer or a run
// whose reports were all acknowledged it still showed the translator as
// it was before: the lab's DTA stage took such a publication (collector
// up, nothing outstanding, counters still) for a settled translator and
// read a Key-Increment whose atomics had not been sent yet.
func TestFreshStatus(t *testing.T) {
	b := newServiceBed(t, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc := ReporterConfig{Keys: 500, Redundancy: 2, Count: 300, Retransmittable: true, Seed: 9}
	rc.Mix.KeyWrite = 1
	for i := uint64(1); i <= 3; i++ {
		// Each reporter resolves the translator: an ARP request the
		// loop answered before reporter returns.
		b.reporter(t, 0, rc)
		st, err := b.svc.FreshStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Stats.ARPReplies < i {
			t.Fatalf("after %d ARP answers the status shows %d", i, st.Stats.ARPReplies)
		}
	}
	r := b.reporter(t, 0, rc)
	runReporters(t, []*Reporter{r})
	st, err := b.svc.FreshStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Every report was acknowledged, so taken: each a Key-Write
	// translated (none lost on the way, none dropped).
	if got := st.Collectors[0].Translate.Reports[dtawire.OpKeyWrite]; got != rc.Count || st.Collectors[0].Conn.Packets == 0 {
		t.Fatalf("all %d reports acknowledged, the status shows %d translated and %d RDMA packets", rc.Count, got, st.Collectors[0].Conn.Packets)
	}
	// A loop that stopped publishes no more: FreshStatus does not wait.
	b.stop()
	if _, err := b.svc.FreshStatus(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestStatusFreshHTTP asks /v1/status?fresh=1 what FreshStatus gives: a
// status published after the request (the ARP answer the reporter drew
// shows in it), and refuses another value of fresh.
func TestStatusFreshHTTP(t *testing.T) {
	b := newServiceBed(t, 1, nil)
	h := service.New("dta-fresh", "127.0.0.1:0", nil)
	b.svc.Register(h)
	rc := ReporterConfig{Keys: 10, Count: 1, Seed: 3}
	rc.Mix.KeyWrite = 1
	b.reporter(t, 0, rc)
	get := func(q string) (int, Status) {
		rec := httptest.NewRecorder()
		h.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/status"+q, nil))
		var st Status
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
				t.Fatal(err)
			}
		}
		return rec.Code, st
	}
	if code, st := get("?fresh=1"); code != http.StatusOK || st.Stats.ARPReplies < 1 {
		t.Fatalf("fresh status: %d, %d ARP answers", code, st.Stats.ARPReplies)
	}
	if code, _ := get("?fresh=yes"); code != http.StatusBadRequest {
		t.Fatalf("fresh=yes: %d, want 400", code)
	}
	if code, _ := get(""); code != http.StatusOK {
		t.Fatalf("status: %d", code)
	}
}
