package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/png" // NotBlank decodes screenshots
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrNoBrowser is returned (wrapped) by Screenshot when no headless
// browser is installed: callers and tests skip the check rather than
// fail, since the report itself does not need one.
var ErrNoBrowser = errors.New("report: no headless Chromium on PATH")

// browsers are the names Chromium is installed under: Debian's package,
// Ubuntu's and older distributions', Google's builds.
var browsers = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"}

// FindBrowser returns the path of the first Chromium on PATH, or an
// error wrapping ErrNoBrowser.
func FindBrowser() (string, error) {
	for _, name := range browsers {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w (looked for %s)", ErrNoBrowser, strings.Join(browsers, ", "))
}

// Screenshot window size: wide enough for the page's 1100-pixel column,
// tall enough for a summary's first screens.
const (
	ScreenshotWidth  = 1280
	ScreenshotHeight = 2000
)

// Screenshot renders the HTML file at htmlPath in headless Chromium and
// writes what a reader would see (ScreenshotWidth x ScreenshotHeight) as
// a PNG at pngPath. ctx bounds the browser's run; cancelling it kills
// the browser.
func Screenshot(ctx context.Context, htmlPath, pngPath string) error {
	return ScreenshotSize(ctx, htmlPath, pngPath, ScreenshotWidth, ScreenshotHeight)
}

// ScreenshotSize is Screenshot with a window size.
func ScreenshotSize(ctx context.Context, htmlPath, pngPath string, width, height int) error {
	browser, err := FindBrowser()
	if err != nil {
		return err
	}
	if width <= 0 || height <= 0 {
		return fmt.Errorf("report: screenshot size %dx%d", width, height)
	}
	src, err := filepath.Abs(htmlPath)
	if err != nil {
		return err
	}
	if _, err := os.Stat(src); err != nil {
		return err
	}
	dst, err := filepath.Abs(pngPath)
	if err != nil {
		return err
	}
	// A profile of its own: Chromium refuses to share one with a running
	// instance (or a concurrent test), and the user's should not be
	// touched anyway.
	profile, err := os.MkdirTemp("", "report-chromium-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(profile)
	os.Remove(dst) // so that a stale file cannot pass for this run's output

	cmd := exec.CommandContext(ctx, browser, append(headlessArgs(profile),
		"--window-size="+strconv.Itoa(width)+","+strconv.Itoa(height),
		"--screenshot="+dst,
		fileURL(src),
	)...)
	cmd.Env = append(os.Environ(), "HOME="+profile) // crash reports and caches go to the temporary profile
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Chromium forks helpers (zygote, GPU, network service); a timeout
	// must take them down too, and a helper still holding the output
	// pipe must not keep Run from returning.
	killGroup(cmd)
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("report: screenshot of %s: %w", htmlPath, ctx.Err())
		}
		return fmt.Errorf("report: screenshot of %s: %v: %s", htmlPath, err, tail(out.String(), 2000))
	}
	if st, err := os.Stat(dst); err != nil || st.Size() == 0 {
		return fmt.Errorf("report: %s wrote no screenshot: %s", browser, tail(out.String(), 2000))
	}
	return nil
}

// fileURL is the file:// URL of an absolute path, with the bytes a URL
// cannot hold percent-escaped.
func fileURL(path string) string {
	var b strings.Builder
	b.WriteString("file://")
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c == '/' || c == '-' || c == '_' || c == '.' || c == '~' ||
			('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// MinInk is the share of pixels NotBlank wants to differ from the
// background. A rendered report (headings, tables, charts) has several
// percent; an empty page, an error page with one line, or a white
// screenshot of a page that failed to load has well under one.
const MinInk = 0.01

// NotBlank reports whether the PNG at pngPath shows something: at least
// MinInk of its pixels differ clearly from its background, taken as the
// most common color.
func NotBlank(pngPath string) (bool, error) {
	share, err := InkShare(pngPath)
	return share >= MinInk, err
}

// InkShare is the share of the image's pixels that differ clearly from
// its most common color.
func InkShare(pngPath string) (float64, error) {
	f, err := os.Open(pngPath)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	img, _, err := image.Decode(f)
	if err != nil {
		return 0, fmt.Errorf("report: %s: %w", pngPath, err)
	}
	return inkShare(img), nil
}

func inkShare(img image.Image) float64 {
	b := img.Bounds()
	total := b.Dx() * b.Dy()
	if total == 0 {
		return 0
	}
	rgb := func(x, y int) [3]uint8 {
		c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
		return [3]uint8{c.R, c.G, c.B}
	}
	counts := make(map[[3]uint8]int)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			counts[rgb(x, y)]++
		}
	}
	var bg [3]uint8
	best := -1
	for c, n := range counts {
		if n > best || (n == best && less(c, bg)) {
			bg, best = c, n
		}
	}
	// Anti-aliasing and JPEG-like noise leave pixels a few levels off the
	// background; only a clear difference counts as ink.
	const threshold = 24
	ink := 0
	for c, n := range counts {
		d := 0
		for i := range c {
			d += absDiff(c[i], bg[i])
		}
		if d > threshold {
			ink += n
		}
	}
	return float64(ink) / float64(total)
}

func less(a, b [3]uint8) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func absDiff(a, b uint8) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}

// headlessArgs are the flags every headless Chromium run here takes, with
// a throwaway profile directory.
func headlessArgs(profile string) []string {
	return []string{
		"--headless",
		"--no-sandbox",            // root in a container has no user namespace for the sandbox
		"--disable-gpu",           // none on a lab server
		"--disable-dev-shm-usage", // containers often have a 64 MB /dev/shm
		"--hide-scrollbars",       // a scrollbar is not part of the page
		"--no-first-run", "--no-default-browser-check", "--disable-extensions",
		"--user-data-dir=" + profile,
	}
}
