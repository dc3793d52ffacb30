package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdma-appliance/appliance/translator/inject"
)

// TestLuminaTrafficgen runs both sides of `appliance lumina trafficgen`
// in this process on the two ends of a ring link; the requester pushes the
// connections and the intents to a stand-in injector before traffic.
func TestLuminaTrafficgen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var mu sync.Mutex
	var loaded []inject.LoadRequest
	inj := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req inject.LoadRequest
		if r.URL.Path != "/v1/load" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad", 400)
			return
		}
		mu.Lock()
		loaded = append(loaded, req)
		mu.Unlock()
		w.Write([]byte("{}"))
	}))
	defer inj.Close()
	intents := t.TempDir() + "/intents.json"
	if err := os.WriteFile(intents, []byte(`{"intents": [{"qpn": 1, "psn": 2, "iter": 1, "type": "ecn"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	link := fmt.Sprintf("tgcli%d", time.Now().UnixNano()%1e6)
	ctx := context.Background()
	respDone := make(chan [3]string, 1)
	go func() {
		var o, e bytes.Buffer
		c := run(ctx, []string{"lumina", "trafficgen", "--role", "responder", "--nic", "ring:" + link + ".b", "--gid", "10.8.0.2",
			"--listen-port", strconv.Itoa(port)}, &o, &e)
		respDone <- [3]string{strconv.Itoa(c), o.String(), e.String()}
	}()
	var o, e bytes.Buffer
	code := run(ctx, []string{"lumina", "trafficgen", "--role", "requester", "--nic", "ring:" + link + ".a", "--gid", "10.8.0.1",
		"--listen-port", strconv.Itoa(port), "--num-qps", "3", "--num-msgs-per-qp", "4", "--message-size", "5000",
		"--injector", inj.URL, "--intents", intents, "127.0.0.1"}, &o, &e)
	out, errOut := o.String(), e.String()
	if code != 0 || !strings.Contains(out, "3 QPs of write, 4 messages of 5000 B") || strings.Count(out, "memory ok true") != 3 {
		t.Fatalf("requester: %d %q %q", code, out, errOut)
	}
	r := <-respDone
	if r[0] != "0" || !strings.Contains(r[1], "memory correct on 3") {
		t.Fatalf("responder: %v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(loaded) != 1 || len(loaded[0].Conns) != 3 || len(loaded[0].Intents) != 1 || !loaded[0].Reset ||
		loaded[0].Geometry.MessageSize != 5000 || loaded[0].Conns[0].RequesterIP.String() != "10.8.0.1" {
		t.Fatalf("injector got %+v", loaded)
	}
}
