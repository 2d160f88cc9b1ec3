package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sendonce/sendonce/internal/sqldialect"
)

// pgBatchTx is a batch's transaction on one PostgreSQL connection, with
// fewer round trips than a pgx.Tx: BEGIN goes out in one pipeline with the
// batch's first statement, and the deferred rows in one with COMMIT. A
// batch of n accepts then costs n + 1 round trips (one deciding each key,
// one to write and commit) instead of n + 4.
//
// Its statements ignore their caller's cancellation (see groupCommit).
type pgBatchTx struct {
	conn   *pgxpool.Conn
	rebind *sqldialect.Rebinder
	begun  bool
}

// beginPostgres takes a connection for a batch; the transaction begins
// with the first statement.
func (s *Store) beginPostgres(ctx context.Context) (batchTx, error) {
	conn, err := s.PG.Acquire(ctx)
	if err != nil {
		return batchTx{}, pgUnavailable(err)
	}
	t := &pgBatchTx{conn: conn, rebind: s.rebind}
	return batchTx{q: t, commit: t.commit, rollback: t.rollback}, nil
}

// pipeline sends BEGIN (unless begun) and then sts as one round trip, and
// returns the results of sts.
func (t *pgBatchTx) pipeline(ctx context.Context, sts ...statement) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	if !t.begun {
		b.Queue("BEGIN")
	}
	for _, st := range sts {
		b.Queue(t.rebind.Rebind(st.sql), st.args...)
	}
	br := t.conn.SendBatch(context.WithoutCancel(ctx), b)
	if !t.begun {
		// Once sent, the session may be in a transaction either way: the
		// rollback must be sent.
		t.begun = true
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, fmt.Errorf("begin: %w", pgUnavailable(err))
		}
	}
	return br, nil
}

// begunQ runs the statements that come once the transaction has begun,
// one round trip each, detached.
func (t *pgBatchTx) begunQ() pgxQuerier {
	return pgxQuerier{db: t.conn, rebind: t.rebind, detached: true}
}

func (t *pgBatchTx) exec(ctx context.Context, s string, args ...any) (int64, error) {
	if t.begun {
		return t.begunQ().exec(ctx, s, args...)
	}
	br, err := t.pipeline(ctx, statement{sql: s, args: args})
	if err != nil {
		return 0, err
	}
	tag, err := br.Exec()
	if err != nil {
		_ = br.Close()
		return 0, pgUnavailable(err)
	}
	return tag.RowsAffected(), pgUnavailable(br.Close())
}

func (t *pgBatchTx) queryRow(ctx context.Context, s string, args ...any) row {
	if t.begun {
		return t.begunQ().queryRow(ctx, s, args...)
	}
	br, err := t.pipeline(ctx, statement{sql: s, args: args})
	if err != nil {
		return errRow{err}
	}
	return closingRow{r: pgxRow{br.QueryRow()}, br: br}
}

func (t *pgBatchTx) query(ctx context.Context, s string, args ...any) (rows, error) {
	if !t.begun {
		// Rare as a first statement (the claim): begin on its own.
		if _, err := t.exec(ctx, "SELECT 1"); err != nil {
			return nil, err
		}
	}
	return t.begunQ().query(ctx, s, args...)
}

// commit writes d's rows and commits, in one round trip.
func (t *pgBatchTx) commit(ctx context.Context, d *deferredRows) (flushErr, err error) {
	if err := d.errOrNil(); err != nil {
		return err, nil
	}
	sts := d.take()
	if !t.begun && len(sts) == 0 {
		t.conn.Release() // nothing was written
		return nil, nil
	}
	br, err := t.pipeline(ctx, append(sts, statement{sql: "COMMIT"})...)
	if err != nil {
		return err, nil
	}
	for _, st := range sts {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return d.fail(st, err), nil
		}
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && tag.String() != "COMMIT" {
		err = errors.New("the transaction was rolled back")
	}
	t.release()
	return nil, pgUnavailable(err)
}

func (t *pgBatchTx) rollback() {
	if t.begun {
		_, _ = t.conn.Exec(context.Background(), "ROLLBACK")
	}
	t.release()
}

// release gives the connection back; one left inside a transaction (the
// rollback failed) is closed by the pool rather than reused.
func (t *pgBatchTx) release() {
	t.conn.Release()
}

// closingRow closes its pipeline's results once scanned.
type closingRow struct {
	r  row
	br pgx.BatchResults
}

func (c closingRow) Scan(dest ...any) error {
	if err := c.r.Scan(dest...); err != nil {
		_ = c.br.Close()
		return err
	}
	return c.br.Close()
}
