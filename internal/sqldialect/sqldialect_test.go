package sqldialect

import "testing"

func TestRebind(t *testing.T) {
	cases := []struct {
		d      Dialect
		in     string
		expect string
	}{
		{Postgres, "SELECT 1", "SELECT 1"},
		{Postgres, "a = ? AND b = ?", "a = $1 AND b = $2"},
		{Postgres, "VALUES (?,?,?,?,?,?,?,?,?,?,?)", "VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)"},
		{Postgres, "name = ? -- é ünicode", "name = $1 -- é ünicode"},
		{SQLite, "a = ? AND b = ?", "a = ? AND b = ?"},
		{Dialect(""), "a = ?", "a = ?"},
	}
	var r Rebinder
	for _, c := range cases {
		if got := c.d.Rebind(c.in); got != c.expect {
			t.Errorf("%s.Rebind(%q) = %q; want %q", c.d, c.in, got, c.expect)
		}
		if c.d != Postgres {
			continue
		}
		for range 2 { // the second call answers from the cache
			if got := r.Rebind(c.in); got != c.expect {
				t.Errorf("Rebinder.Rebind(%q) = %q; want %q", c.in, got, c.expect)
			}
		}
	}
}

func TestValid(t *testing.T) {
	for d, want := range map[Dialect]bool{SQLite: true, Postgres: true, "": false, "postgresql": false, "mysql": false} {
		if got := d.Valid(); got != want {
			t.Errorf("%q.Valid() = %v; want %v", d, got, want)
		}
	}
}
