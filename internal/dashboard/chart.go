package dashboard

import "fmt"

// The overview's chart: one stacked bar per day, drawn on the server as
// inline SVG (no script, nothing fetched), so a day-one overview is one
// flat line instead of a table of zeros.

const (
	chartBarWidth = 20 // viewBox units per day, bar and gap
	chartHeight   = 80 // viewBox units of the tallest bar
)

// chartBar is one day's bar: its x, and the stacked segments from the
// bottom (sent, failed, unknown, the rest still on its way).
type chartBar struct {
	X     int
	Segs  []chartSeg
	Title string
}

// chartSeg is one segment of a bar: a class (its colour) and its extent.
type chartSeg struct {
	Class string
	Y, H  float64
}

// chartBars draws days scaled to max (at least 1).
func chartBars(days []dayCount, max int) []chartBar {
	out := make([]chartBar, 0, len(days))
	for i, d := range days {
		rest := d.Accepted - d.Sent - d.Failed - d.Unknown
		out = append(out, stackedBar(i*chartBarWidth, fmt.Sprintf("%s: %d accepted, %d sent, %d failed, %d unknown",
			d.Day, d.Accepted, d.Sent, d.Failed, d.Unknown), int64(max),
			chartPart{"sent", int64(d.Sent)}, chartPart{"failed", int64(d.Failed)},
			chartPart{"unknown", int64(d.Unknown)}, chartPart{"queued", int64(rest)}))
	}
	return out
}

// chartPart is one segment of a bar before scaling: its class and count.
type chartPart struct {
	class string
	n     int64
}

// stackedBar is the bar at x whose parts stack from the bottom, each
// scaled to top; a part of no count draws nothing. The overview's and the
// DMARC page's charts are drawn by it alike.
func stackedBar(x int, title string, top int64, parts ...chartPart) chartBar {
	b := chartBar{X: x, Title: title}
	y := float64(chartHeight)
	for _, p := range parts {
		if p.n <= 0 {
			continue
		}
		h := float64(p.n) * chartHeight / float64(top)
		y -= h
		b.Segs = append(b.Segs, chartSeg{Class: p.class, Y: y, H: h})
	}
	return b
}
