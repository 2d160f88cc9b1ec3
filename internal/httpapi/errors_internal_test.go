package httpapi

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// A request whose client left is not an internal error: 499 in logs and
// metrics, logged at info; the same error with the client still there is
// a 500 and logged as an error.
func TestErrorResponse_ClientGoneIsNotInternal(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gone := httptest.NewRequest(http.MethodPost, "/v1/send", nil).WithContext(ctx)
	if status, _ := kit.ErrorResponse(gone, logger, context.Canceled); status != kit.StatusClientClosedRequest {
		t.Fatalf("client gone: %d, want %d", status, kit.StatusClientClosedRequest)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("a client leaving was logged as an error: %s", logs.String())
	}
	here := httptest.NewRequest(http.MethodPost, "/v1/send", nil)
	if status, _ := kit.ErrorResponse(here, logger, errors.New("disk on fire")); status != http.StatusInternalServerError {
		t.Fatalf("internal error: %d, want 500", status)
	}
	if status, _ := kit.ErrorResponse(here, logger, context.Canceled); status != http.StatusInternalServerError {
		t.Fatalf("a cancellation not the client's: %d, want 500", status)
	}
}
