package app

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/trace"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/tracing"
)

// AcceptSend records a prepared send in tx. The row is all an accepted send
// needs: queued, it is its own delivery job, due at once, and its creation
// is read from it as the "accepted" event. The caller commits it together
// with the stored idempotent response.
//
// With tracing on it is the acceptance span, a child of the request's, and
// the send keeps that span's traceparent (core.Send.TraceParent) for its
// attempts. A transaction run again accepts again, in a span of its own.
func (s *Service) AcceptSend(ctx context.Context, tx core.Tx, key *core.APIKey, send *core.Send) error {
	if !s.tracer.Enabled() {
		return s.acceptSend(ctx, tx, key, send)
	}
	ctx, span := s.tracer.Start(ctx, "sendonce.accept", trace.SpanKindProducer)
	err := s.acceptSend(ctx, tx, key, send)
	if span.IsRecording() {
		span.SetAttributes(tracing.SendID.String(send.ID), tracing.Tenant.String(key.Tenant), tracing.Status.String(string(send.Status)))
	}
	outcome := "accepted"
	if err != nil {
		outcome = core.ErrorCode(err)
	}
	tracing.End(span, err != nil, outcome)
	return err
}

// Receive stores in once, with its parsed view and thread, in one
// transaction; the same message again is recognised as a duplicate. It
// is the one way mail comes in, whatever the door. With tracing on it is
// the received message's span.
func (s *Service) Receive(ctx context.Context, in Incoming) (Received, error) {
	if !s.tracer.Enabled() {
		return s.receive(ctx, in)
	}
	kind := trace.SpanKindServer // an SMTP client handed it to us
	if in.Source != "smtp" {
		kind = trace.SpanKindConsumer // fetched from a connected mailbox
	}
	ctx, span := s.tracer.Start(ctx, "sendonce.receive", kind)
	out, err := s.receive(ctx, in)
	if span.IsRecording() {
		span.SetAttributes(tracing.Tenant.String(in.Tenant), tracing.Mailbox.String(in.MailboxID),
			tracing.Source.String(in.Source), tracing.Received.String(out.ID))
	}
	outcome := "received"
	switch {
	case err != nil:
		outcome = core.ErrorCode(err)
		if errors.Is(err, ErrReceivedStorageFull) {
			outcome = "storage_full"
		}
	case out.Duplicate:
		outcome = "duplicate"
	}
	tracing.End(span, err != nil, outcome)
	return out, err
}
