package report

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ScreenshotURL is ScreenshotSize for a page a server serves (the
// collector's dashboard) rather than a file: url is an http, https or
// file URL.
func ScreenshotURL(ctx context.Context, url, pngPath string, width, height int) error {
	if width <= 0 || height <= 0 {
		return fmt.Errorf("report: screenshot size %dx%d", width, height)
	}
	dst, err := filepath.Abs(pngPath)
	if err != nil {
		return err
	}
	os.Remove(dst) // so that a stale file cannot pass for this run's output
	out, err := chromium(ctx, url, "--window-size="+strconv.Itoa(width)+","+strconv.Itoa(height), "--screenshot="+dst)
	if err != nil {
		return err
	}
	if st, err := os.Stat(dst); err != nil || st.Size() == 0 {
		return fmt.Errorf("report: no screenshot of %s: %s", url, tail(string(out), 2000))
	}
	return nil
}

// DumpDOM loads url in headless Chromium and returns the document as the
// browser built it: what a reader's browser makes of the page, not the
// bytes the server sent.
func DumpDOM(ctx context.Context, url string) (string, error) {
	out, err := chromium(ctx, url, "--dump-dom")
	if err != nil {
		return "", err
	}
	if !bytes.Contains(out, []byte("<html")) {
		return "", fmt.Errorf("report: %s: Chromium printed no document", url)
	}
	return string(out), nil
}

// chromium runs headless Chromium on url with the flags Screenshot uses
// plus extra, and returns its standard output.
func chromium(ctx context.Context, url string, extra ...string) ([]byte, error) {
	browser, err := FindBrowser()
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") && !strings.HasPrefix(url, "file://") {
		return nil, fmt.Errorf("report: %q is not an http, https or file URL", url)
	}
	profile, err := os.MkdirTemp("", "report-chromium-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(profile)
	args := append(headlessArgs(profile), extra...)
	cmd := exec.CommandContext(ctx, browser, append(args, url)...)
	cmd.Env = append(os.Environ(), "HOME="+profile)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	killGroup(cmd)
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("report: chromium on %s: %w", url, ctx.Err())
		}
		return nil, fmt.Errorf("report: chromium on %s: %v: %s", url, err, tail(stderr.String(), 2000))
	}
	return stdout.Bytes(), nil
}
