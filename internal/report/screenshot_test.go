package report

import (
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSampleScreenshot writes the sample report and, where Chromium is
// installed, looks at it as a reader would: the screenshot must show
// the page, not a blank or error screen.
func TestSampleScreenshot(t *testing.T) {
	dir := t.TempDir()
	if *keep != "" {
		dir = *keep
	}
	htmlPath := filepath.Join(dir, "sample.html")
	if err := samplePage().WriteFile(htmlPath); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "sample.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	err := Screenshot(ctx, htmlPath, shot)
	if errors.Is(err, ErrNoBrowser) {
		t.Skipf("not screenshotting the sample page: %v (Debian: apt-get install chromium)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot in %v", time.Since(start).Round(time.Millisecond))
	share, err := InkShare(shot)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f%% of the screenshot is ink", 100*share)
	if ok, _ := NotBlank(shot); !ok {
		t.Errorf("screenshot %s is blank (%.2f%% ink)", shot, 100*share)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Width != ScreenshotWidth || cfg.Height != ScreenshotHeight {
		t.Errorf("screenshot is %dx%d", cfg.Width, cfg.Height)
	}
}

func TestScreenshotErrors(t *testing.T) {
	if _, err := FindBrowser(); err != nil {
		t.Setenv("PATH", t.TempDir())
		if err := Screenshot(context.Background(), "x.html", "x.png"); !errors.Is(err, ErrNoBrowser) {
			t.Errorf("without a browser: %v", err)
		}
		return
	}
	if err := Screenshot(context.Background(), filepath.Join(t.TempDir(), "missing.html"), "x.png"); err == nil {
		t.Error("screenshot of a missing file succeeded")
	}
	t.Setenv("PATH", t.TempDir())
	if err := Screenshot(context.Background(), "x.html", "x.png"); !errors.Is(err, ErrNoBrowser) {
		t.Errorf("with an empty PATH: %v", err)
	}
}

func writeTestPNG(t *testing.T, img image.Image) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "img.png")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestNotBlank(t *testing.T) {
	blank := image.NewRGBA(image.Rect(0, 0, 200, 100))
	for i := range blank.Pix {
		blank.Pix[i] = 0xff
	}
	if ok, err := NotBlank(writeTestPNG(t, blank)); ok || err != nil {
		t.Errorf("white image: %v, %v", ok, err)
	}
	// A few stray pixels and faint noise are still blank.
	blank.SetRGBA(3, 3, color.RGBA{0, 0, 0, 0xff})
	blank.SetRGBA(10, 10, color.RGBA{0xf8, 0xf8, 0xf8, 0xff})
	if ok, _ := NotBlank(writeTestPNG(t, blank)); ok {
		t.Error("white image with one dot is not blank")
	}
	// A chart is not, whatever its background.
	c := &Chart{Title: "t", Series: []Series{sine("s", 100, 0)}, Width: 200, Height: 100}
	if ok, err := NotBlank(writeTestPNG(t, c.Image())); !ok || err != nil {
		t.Errorf("chart: %v, %v", ok, err)
	}
	if _, err := NotBlank(filepath.Join(t.TempDir(), "missing.png")); err == nil {
		t.Error("missing file")
	}
	notPNG := filepath.Join(t.TempDir(), "x.png")
	os.WriteFile(notPNG, []byte("not a png"), 0o644)
	if _, err := NotBlank(notPNG); err == nil {
		t.Error("not a PNG")
	}
}

func TestFileURL(t *testing.T) {
	if got := fileURL("/tmp/a b/r#1%.html"); got != "file:///tmp/a%20b/r%231%25.html" {
		t.Errorf("fileURL = %q", got)
	}
}
