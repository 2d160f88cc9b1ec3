package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
)

// withRaw runs fn on the stmtConn behind one connection of db.
func withRaw(t *testing.T, c *sql.Conn, fn func(sc *stmtConn)) {
	t.Helper()
	if err := c.Raw(func(dc any) error {
		fn(dc.(*stmtConn))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestStmtConn_ReusesStatementsSafely(t *testing.T) {
	ctx := context.Background()
	s := openSQLiteStore(t, "stmt.db")
	c, err := s.W.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// A script of two statements runs whole.
	if _, err := c.ExecContext(ctx, `CREATE TABLE st (n INTEGER); INSERT INTO st (n) VALUES (1), (2), (3)`); err != nil {
		t.Fatal(err)
	}
	const q = `SELECT n FROM st ORDER BY n`
	var first *connStmt
	for i := range 3 {
		var sum int
		rows, err := c.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for rows.Next() {
			if seen++; seen > 3 {
				rows.Close()
				t.Fatal("the open rows restarted: the nested query reset their statement")
			}
			var n int
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			sum += n
			if n == 2 {
				// The same text while its rows are open: must not reset them.
				var inner int
				if err := c.QueryRowContext(ctx, `SELECT count(*) FROM (`+q+`)`).Scan(&inner); err != nil || inner != 3 {
					t.Fatalf("inner query: %d %v", inner, err)
				}
				var again int
				nested, err := c.QueryContext(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				for nested.Next() {
					again++
				}
				nested.Close()
				if again != 3 {
					t.Fatalf("the same query while its rows are open saw %d rows, want 3", again)
				}
			}
		}
		rows.Close()
		if sum != 6 {
			t.Fatalf("run %d: sum %d, want 6 (the open rows were disturbed)", i, sum)
		}
		withRaw(t, c, func(sc *stmtConn) {
			cs := sc.stmts[q]
			if cs == nil {
				t.Fatal("the query was not kept prepared")
			}
			if first == nil {
				first = cs
			} else if cs != first {
				t.Fatal("the query was prepared again instead of reused")
			}
			if cs.busy {
				t.Fatal("a closed query's statement is still marked busy")
			}
		})
	}

	// The cache stays bounded however many texts run.
	for i := range maxConnStmts + 50 {
		var n int
		if err := c.QueryRowContext(ctx, fmt.Sprintf(`SELECT %d`, i)).Scan(&n); err != nil || n != i {
			t.Fatalf("SELECT %d: %d %v", i, n, err)
		}
	}
	withRaw(t, c, func(sc *stmtConn) {
		if len(sc.stmts) > maxConnStmts {
			t.Fatalf("%d statements kept, bound %d", len(sc.stmts), maxConnStmts)
		}
	})
}
