package e2e

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluice-fs/sluice/internal/proctest"
)

const chromium = "/usr/bin/chromium"

// TestDashboardInChromium loads the admin port's dashboard in headless
// Chromium while the server works, waits until the charts have drawn
// samples with data, and checks a screenshot: the throughput chart has
// pixels in its series colours, and every target has a bar.
func TestDashboardInChromium(t *testing.T) {
	proctest.NeedTool(t, chromium) // apt-get install chromium
	s := startServer(t, "", "--http", "127.0.0.1:0")
	admin, err := s.proc.WaitLine(regexp.MustCompile(`admin on (\S+)`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := s.client()
	writeFile(t, c, "/d", randBytes(11, 4<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	load, stopLoad := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; load.Err() == nil; i++ {
			c.Stat(load, "/d")
			readFile(c, "/d")
		}
	}()
	defer func() { stopLoad(); <-done }()

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "chromium")), chromedp.WindowSize(1280, 1000))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel() // stops the browser process
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	type box struct{ X, Y, W, H float64 }
	if err := chromedp.Do(bctx, chromedp.Navigate("http://"+admin+"/?interval=250")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	_, err = chromedp.Run(bctx, chromedp.Poll[bool](`(() => { const c = document.getElementById("throughput");
		return Number(c.dataset.points) >= 4 && Number(c.dataset.max) > 0; })()`,
		chromedp.WithPollingTimeout(45*time.Second)))
	if err != nil {
		t.Fatalf("dashboard did not render charts with data: %v", err)
	}
	bars, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll(".target .bar").length`))
	if err != nil {
		t.Fatal(err)
	}
	rect, err := chromedp.Run(bctx, chromedp.Evaluate[box](`(() => { const r = document.getElementById("throughput").getBoundingClientRect();
		return {X: r.x + scrollX, Y: r.y + scrollY, W: r.width, H: r.height}; })()`))
	if err != nil {
		t.Fatal(err)
	}
	if bars != 4 {
		t.Errorf("dashboard shows %d target bars, want 4", bars)
	}
	// Count pixels of the read series colour (#1f77b4) inside the chart.
	// The line grows as samples come in (every 250 ms): a few samples
	// may draw fewer pixels than a line should have (48 once, on a busy
	// machine), so the screenshot is taken again until it shows one, for
	// up to 20 s.
	var n int
	for deadline := time.Now().Add(20 * time.Second); ; {
		shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(shot))
		if err != nil {
			t.Fatal(err)
		}
		if p := os.Getenv("SLUICE_DASHBOARD_PNG"); p != "" {
			os.WriteFile(p, shot, 0o644) // for a person to look at
		}
		n = countColour(img, image.Rect(int(rect.X), int(rect.Y), int(rect.X+rect.W), int(rect.Y+rect.H)), 0x1f, 0x77, 0xb4)
		if n >= 50 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("throughput chart has %d pixels of the read series colour, want a drawn line (rect %+v)", n, rect)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("throughput chart: %d pixels of the read line", n)
}

func countColour(img image.Image, r image.Rectangle, cr, cg, cb uint8) int {
	r = r.Intersect(img.Bounds())
	n := 0
	near := func(a uint32, b uint8) bool { d := int(a>>8) - int(b); return d > -24 && d < 24 }
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			if near(pr, cr) && near(pg, cg) && near(pb, cb) {
				n++
			}
		}
	}
	return n
}
