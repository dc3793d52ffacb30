package report

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBrowseURL loads a served page in Chromium: the DOM it built holds
// the page's table, and its screenshot is not blank.
func TestBrowseURL(t *testing.T) {
	if _, err := FindBrowser(); err != nil {
		t.Skipf("%v (Debian: apt-get install chromium)", err)
	}
	html := renderPage(t, samplePage())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(html))
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dom, err := DumpDOM(ctx, srv.URL+"/page")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dom, "Injected events") || !strings.Contains(dom, "<svg") {
		t.Fatalf("DOM:\n%s", dom)
	}
	shot := filepath.Join(t.TempDir(), "page.png")
	if err := ScreenshotURL(ctx, srv.URL+"/page", shot, 1024, 768); err != nil {
		t.Fatal(err)
	}
	if ok, err := NotBlank(shot); err != nil || !ok {
		t.Fatalf("blank screenshot: %v", err)
	}
	if _, err := DumpDOM(ctx, "ftp://example.com/"); err == nil || errors.Is(err, ErrNoBrowser) {
		t.Fatalf("ftp URL: %v", err)
	}
}
