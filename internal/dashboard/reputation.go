package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// The reputation page: the tenant's bulk stream under the reputation
// guard (docs/deliverability.md), its rolling rates hour by hour as an
// inline SVG chart, and, for admin keys, the resume button.

// reputationHours is how far back the chart goes.
const reputationHours = 48

// resumeKeyPrefix marks the idempotency keys of the dashboard's resumes.
const resumeKeyPrefix = "ui-resume-"

type reputationData struct {
	*app.Reputation
	Points []app.ReputationPoint
	Lines  reputationChart
	// ResumeNonce names this page's resume form's one submission.
	ResumeNonce string
}

// Pct shows a rate as a percentage.
func (reputationData) Pct(r float64) string { return fmt.Sprintf("%.2f %%", 100*r) }

func (d *Dashboard) reputation(q *req) error {
	ctx, tenant := q.ctx(), q.key.Tenant
	rep, err := d.svc.Reputation(ctx, tenant)
	if err != nil {
		return err
	}
	points, err := d.svc.ReputationSeries(ctx, tenant, reputationHours)
	if err != nil {
		return err
	}
	return d.render(q, 0, "reputation", "Reputation", reputationData{Reputation: rep, Points: points,
		Lines: drawReputation(points, rep.Thresholds), ResumeNonce: token()})
}

// resumeReputation resumes the bulk stream through the process's
// idempotency engine, as POST /v1/reputation/resume does: the form's
// nonce is the key, so a double click resumes (and tells the webhooks)
// once.
func (d *Dashboard) resumeReputation(q *req) error {
	ctx, key := q.ctx(), q.key
	nonce := q.r.PostFormValue("nonce")
	idemKey, err := idempotency.ParseKey(resumeKeyPrefix+nonce, idempotency.MaxKeyLen)
	if nonce == "" || err != nil {
		return core.Errorf(core.CodeValidation, "nonce", "the resume form has no valid nonce: reload the page and try again")
	}
	fp, err := idempotency.Fingerprint([]byte(`{}`))
	if err != nil {
		return err
	}
	sc, earlier := d.svc.IdempotencyScope(key, http.MethodPost, q.r.URL.Path, idemKey, idemKey, d.idem.TTL(), fp, nil)
	ran := idempotency.Run(ctx, d.idem, idempotency.Write[core.Tx]{
		Scope: sc, Earlier: earlier, Fingerprint: fp, InTx: d.svc.InTx,
		Prepare: func(context.Context) (idempotency.Step[core.Tx], error) {
			return func(ctx context.Context, tx core.Tx) (idempotency.Response, error) {
				rep, err := d.svc.ResumeStreamTx(ctx, tx, key.Tenant)
				if err != nil {
					return idempotency.Response{}, err
				}
				b, err := json.Marshal(rep)
				return idempotency.Response{Status: http.StatusOK, ContentType: "application/json", Body: b}, err
			}, nil
		},
		Refuse: func(error) (idempotency.Response, bool) { return idempotency.Response{}, false },
	})
	switch {
	case ran.Err != nil:
		return ran.Err
	case ran.Outcome == idempotency.InUse:
		return core.Errorf(core.CodeConflict, "", "this resume is still running: wait a moment and reload the page")
	}
	http.Redirect(q.w, q.r, "/ui/reputation", http.StatusSeeOther)
	return nil
}

// reputationChart is the chart's two rate lines and the threshold line,
// each rate drawn as a share of its own threshold (the two differ
// tenfold), so that the dashed line at 100 % is where the stream pauses.
type reputationChart struct {
	W, H, Limit        int
	Complaints, Bounce string // polyline points
	Top                int    // the chart's top, in percent of a threshold
}

const (
	repStep   = 10 // viewBox units per hour
	repHeight = 80
)

func drawReputation(points []app.ReputationPoint, th app.ReputationThresholds) reputationChart {
	top := 150.0 // percent of a threshold at the chart's top; more when a rate goes higher
	for _, p := range points {
		top = max(top, 100*p.ComplaintRate/th.ComplaintRate, 100*p.BounceRate/th.BounceRate)
	}
	y := func(r, limit float64) float64 { return repHeight - 100*r/limit*repHeight/top }
	var c, b strings.Builder
	for i, p := range points {
		x := i * repStep
		fmt.Fprintf(&c, "%d,%.2f ", x, y(p.ComplaintRate, th.ComplaintRate))
		fmt.Fprintf(&b, "%d,%.2f ", x, y(p.BounceRate, th.BounceRate))
	}
	return reputationChart{W: max(1, (len(points)-1)*repStep), H: repHeight, Limit: int(y(1, 1)),
		Complaints: strings.TrimSpace(c.String()), Bounce: strings.TrimSpace(b.String()), Top: int(top)}
}
