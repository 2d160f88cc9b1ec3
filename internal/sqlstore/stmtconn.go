package sqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync"
)

// maxConnStmts bounds the statements one connection keeps prepared.
// sendonce's and River's own texts are a few dozen; texts that vary (a
// multi-row insert per row count) make up the rest.
const maxConnStmts = 256

// stmtConnector opens SQLite connections that keep their prepared
// statements by SQL text and reuse them. database/sql has SQLite parse and
// plan every statement it runs outside a *sql.Stmt, which is how River
// runs all of its queries: profiling showed River's job completion and
// insertion spending most of their time in SQLite's parser, on the single
// write connection every commit waits for.
type stmtConnector struct {
	d   driver.Driver
	dsn string
}

func (c stmtConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.d.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	for _, ok := range []bool{
		is[driver.ConnBeginTx](conn), is[driver.ConnPrepareContext](conn),
		is[driver.ExecerContext](conn), is[driver.QueryerContext](conn),
	} {
		if !ok {
			conn.Close()
			return nil, errors.New("sqlite driver lacks the context interfaces")
		}
	}
	return &stmtConn{Conn: conn, stmts: map[string]*connStmt{}}, nil
}

func (c stmtConnector) Driver() driver.Driver { return c.d }

func is[T any](v any) bool {
	_, ok := v.(T)
	return ok
}

// stmtConn is one connection with its statements. database/sql uses a
// connection from one goroutine at a time, so the map needs no lock; the
// busy flags guard against a statement being run again while its rows are
// still open (which would reset them).
type stmtConn struct {
	driver.Conn
	stmts map[string]*connStmt
}

type connStmt struct {
	st   driver.Stmt
	busy bool
}

// stmt returns the cached statement for query, preparing it when needed;
// nil when it is busy or cannot be prepared (the caller runs the query
// unprepared, and a real error shows there).
func (c *stmtConn) stmt(ctx context.Context, query string) *connStmt {
	if cs, ok := c.stmts[query]; ok {
		if cs.busy {
			return nil
		}
		return cs
	}
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	if len(c.stmts) >= maxConnStmts {
		for q, old := range c.stmts {
			if !old.busy {
				old.st.Close()
				delete(c.stmts, q)
				break
			}
		}
	}
	cs := &connStmt{st: st}
	c.stmts[query] = cs
	return cs
}

func (c *stmtConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if cs := c.stmt(ctx, query); cs != nil {
		cs.busy = true
		defer func() { cs.busy = false }()
		return cs.st.(driver.StmtExecContext).ExecContext(ctx, args)
	}
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c *stmtConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if cs := c.stmt(ctx, query); cs != nil {
		cs.busy = true
		rows, err := cs.st.(driver.StmtQueryContext).QueryContext(ctx, args)
		if err != nil {
			cs.busy = false
			return nil, err
		}
		return &stmtRows{Rows: rows, cs: cs}, nil
	}
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

// PrepareContext is not cached: database/sql closes what it prepares.
func (c *stmtConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c *stmtConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *stmtConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *stmtConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *stmtConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *stmtConn) Close() error {
	for q, cs := range c.stmts {
		cs.st.Close()
		delete(c.stmts, q)
	}
	return c.Conn.Close()
}

// stmtRows frees its statement for reuse when closed.
type stmtRows struct {
	driver.Rows
	cs   *connStmt
	once sync.Once
}

func (r *stmtRows) Close() error {
	err := r.Rows.Close()
	r.once.Do(func() { r.cs.busy = false })
	return err
}
