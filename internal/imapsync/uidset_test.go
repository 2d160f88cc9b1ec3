package imapsync

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// TestPickUIDs: a search answer is clamped to the new UIDs, taken at most
// a pass's worth at a time, each once and in order; UID 0 and "*" are
// refused, and so is an answer naming more messages than the folder has.
func TestPickUIDs(t *testing.T) {
	set := func(rs ...[2]uint32) imap.UIDSet {
		var s imap.UIDSet
		for _, r := range rs {
			s = append(s, imap.UIDRange{Start: imap.UID(r[0]), Stop: imap.UID(r[1])})
		}
		return s
	}
	for _, tc := range []struct {
		name string
		set  imap.UIDSet
		w    uidWindow
		take int
		want []imap.UID
		more bool
		err  bool
	}{
		{name: "plain", set: set([2]uint32{3, 5}, [2]uint32{1, 1}), w: uidWindow{next: 6, holds: 4}, take: 10, want: []imap.UID{1, 3, 4, 5}},
		{name: "after the last seen", set: set([2]uint32{1, 5}), w: uidWindow{after: 3, next: 6, holds: 5}, take: 10, want: []imap.UID{4, 5}},
		{name: "n:* holds the last, below n", set: set([2]uint32{3, 3}), w: uidWindow{after: 3, next: 4, holds: 3}, take: 10},
		{name: "overlapping and reversed", set: set([2]uint32{5, 2}, [2]uint32{3, 7}), w: uidWindow{next: 100, holds: 10}, take: 10, want: []imap.UID{2, 3, 4, 5, 6, 7}},
		{name: "capped", set: set([2]uint32{1, 9}), w: uidWindow{next: 10, holds: 9}, take: 3, want: []imap.UID{1, 2, 3}, more: true},
		{name: "clamped to UIDNEXT", set: set([2]uint32{1, 4294967295}), w: uidWindow{next: 4, holds: 3}, take: 10, want: []imap.UID{1, 2, 3}},
		{name: "zero", set: set([2]uint32{0, 0}), w: uidWindow{next: 4, holds: 3}, take: 10, err: true},
		{name: "star", set: set([2]uint32{5, 0}), w: uidWindow{next: 6, holds: 3}, take: 10, err: true},
		{name: "more than the folder holds", set: set([2]uint32{1, 200000000}), w: uidWindow{next: 200000001, holds: 3, slack: 10}, take: 10, err: true},
		{name: "all of them, n wraps", set: set([2]uint32{1, 4294967295}), w: uidWindow{next: 4294967295, holds: 3, slack: 10}, take: 10, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, more, err := pickUIDs(tc.set, tc.w, tc.take)
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want error %v", err, tc.err)
			}
			if tc.err {
				return
			}
			if !slices.Equal(got, tc.want) || more != tc.more {
				t.Fatalf("got %v more %v, want %v more %v", got, more, tc.want, tc.more)
			}
		})
	}
}

// TestPickUIDs_BoundedMemory: four billion UIDs in one range cost what a
// pass takes, not what the range names.
func TestPickUIDs_BoundedMemory(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	uids, more, err := pickUIDs(imap.UIDSet{{Start: 1, Stop: 4294967295}}, uidWindow{holds: 4294967295}, 1000)
	runtime.ReadMemStats(&after)
	if err != nil || len(uids) != 1000 || !more {
		t.Fatalf("%d UIDs, more %v, %v; want 1000 and more", len(uids), more, err)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Fatalf("allocated %d bytes for one pass of 1000 UIDs", d)
	}
}

// TestGuard: a line longer than the bound or a literal announced larger
// than its bound ends the stream; a literal's own long lines pass.
func TestGuard(t *testing.T) {
	for _, tc := range []struct {
		name, stream string
		bad          bool
	}{
		{name: "short lines", stream: "* OK hi\r\nT1 OK done\r\n"},
		{name: "a long line", stream: "* SEARCH " + strings.Repeat("1 ", 100) + "\r\n", bad: true},
		{name: "a literal within bounds", stream: "* 1 FETCH (BODY[] {150}\r\n" + strings.Repeat("x", 150) + ")\r\n"},
		{name: "a literal too large", stream: "* LIST () \"/\" {5000000000}\r\n", bad: true},
		{name: "a literal of endless digits", stream: "* LIST () \"/\" {9999999999999999999}\r\n", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, sv := net.Pipe()
			defer cl.Close()
			go func() { defer sv.Close(); io.WriteString(sv, tc.stream) }()
			g := newGuard(cl, 64, 1000)
			_, err := io.Copy(io.Discard, g)
			if bad := errors.Is(err, errOverLimit); bad != tc.bad {
				t.Fatalf("err %v, want refused %v", err, tc.bad)
			}
		})
	}
}

// FuzzSearchAnswer runs go-imap's client over the guard against a server
// answering UID SEARCH with the fuzzed line, and pickUIDs over what it
// decoded: whatever the answer, nothing panics, and what is taken is at
// most a pass, ascending, each once, inside the window.
func FuzzSearchAnswer(f *testing.F) {
	f.Add("* SEARCH 0", uint32(0), uint32(4), uint32(3))
	f.Add("* SEARCH 1 2 3", uint32(1), uint32(4), uint32(3))
	f.Add(`* ESEARCH (TAG "%TAG%") UID ALL 1:200000000`, uint32(0), uint32(200000001), uint32(3))
	f.Add(`* ESEARCH (TAG "%TAG%") UID ALL 1:4294967295`, uint32(0), uint32(4294967295), uint32(3))
	f.Add(`* ESEARCH (TAG "%TAG%") UID ALL 1:4294967295`, uint32(7), uint32(0), uint32(4294967295))
	f.Add(`* ESEARCH (TAG "%TAG%") UID ALL 5:*,0`, uint32(0), uint32(10), uint32(9))
	f.Add(`* ESEARCH (TAG "%TAG%") UID ALL 9:2,4:4,3:3`, uint32(2), uint32(10), uint32(9))
	f.Fuzz(func(t *testing.T, answer string, after, next, exists uint32) {
		answer = strings.NewReplacer("\r", " ", "\n", " ").Replace(answer)
		s := &ScriptedServer{Exists: "3", UIDNext: "4", Search: answer}
		cl, sv := net.Pipe()
		go s.serve(sv)
		// An answer the decoder cannot finish waits for the deadline (in the
		// product, the pass's): short, so that the fuzzer does not take it for a hang.
		g := newGuard(cl, 64<<10, 1<<20)
		_ = g.SetPassDeadline(time.Now().Add(300 * time.Millisecond))
		c := imapclient.New(g, nil)
		defer c.Close()
		if err := c.Login("u", "p").Wait(); err != nil {
			t.Fatal(err)
		}
		found, err := c.UIDSearch(&imap.SearchCriteria{}, nil).Wait()
		if err != nil {
			return
		}
		const take = 50
		uids, _, err := pickUIDs(found.All, uidWindow{after: after, next: next, holds: exists, slack: take}, take)
		if err != nil {
			return
		}
		if len(uids) > take {
			t.Fatalf("%d UIDs in a pass of %d", len(uids), take)
		}
		for i, u := range uids {
			if uint32(u) <= after || (next > 0 && uint32(u) >= next) || (i > 0 && u <= uids[i-1]) {
				t.Fatalf("UIDs %v outside (%d, %d) or out of order", uids, after, next)
			}
		}
	})
}

// TestGuard_PassDeadlineOutlivesTheClients: go-imap sets a read deadline
// of its own before each response; the pass's deadline beneath it still
// ends a read of a server that says nothing.
func TestGuard_PassDeadlineOutlivesTheClients(t *testing.T) {
	cl, sv := net.Pipe()
	defer sv.Close()
	g := newGuard(cl, 64, 64)
	defer g.Close()
	if err := g.SetPassDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := g.SetReadDeadline(time.Now().Add(time.Hour)); err != nil { // as the client does
		t.Fatal(err)
	}
	if _, err := g.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v, want the pass's deadline", err)
	}
}
