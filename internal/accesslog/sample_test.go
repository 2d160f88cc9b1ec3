package accesslog

import (
	"context"
	"testing"
)

type counting struct{ byStatus map[int]int }

func (c *counting) Log(_ context.Context, l Line) { c.byStatus[l.Status]++ }

// One in Every of the lines of answers below 400 is written, and every
// 4xx and 5xx line; Every of 1 (or 0) writes them all.
func TestSampled_KeepsEveryErrorAndOneInNOfTheRest(t *testing.T) {
	for _, tc := range []struct {
		every    uint64
		want200  int
		want409  int
		want500  int
		requests int
	}{
		{every: 10, requests: 1000, want200: 100, want409: 1000, want500: 1000},
		{every: 1, requests: 1000, want200: 1000, want409: 1000, want500: 1000},
		{every: 0, requests: 10, want200: 10, want409: 10, want500: 10},
	} {
		c := &counting{byStatus: map[int]int{}}
		s := &Sampled{Logger: c, Every: tc.every}
		for range tc.requests {
			for _, st := range []int{200, 409, 500} {
				s.Log(context.Background(), Line{Status: st})
			}
		}
		if c.byStatus[200] != tc.want200 || c.byStatus[409] != tc.want409 || c.byStatus[500] != tc.want500 {
			t.Errorf("every %d: wrote %v, want 200×%d 409×%d 500×%d", tc.every, c.byStatus, tc.want200, tc.want409, tc.want500)
		}
	}
}
