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
		b := chartBar{X: i * chartBarWidth, Title: fmt.Sprintf("%s: %d accepted, %d sent, %d failed, %d unknown",
			d.Day, d.Accepted, d.Sent, d.Failed, d.Unknown)}
		rest := d.Accepted - d.Sent - d.Failed - d.Unknown
		y := float64(chartHeight)
		for _, s := range []struct {
			class string
			n     int
		}{{"sent", d.Sent}, {"failed", d.Failed}, {"unknown", d.Unknown}, {"queued", rest}} {
			if s.n <= 0 {
				continue
			}
			h := float64(s.n) * chartHeight / float64(max)
			y -= h
			b.Segs = append(b.Segs, chartSeg{Class: s.class, Y: y, H: h})
		}
		out = append(out, b)
	}
	return out
}
