package httpapi

import (
	"errors"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

func TestResendErrors_MapsTheIdempotencyErrors(t *testing.T) {
	r := httptest.NewRequest("POST", "/emails", nil)
	logger := slog.New(slog.DiscardHandler)
	for _, tt := range []struct {
		err    error
		status int
		name   string
	}{
		{kit.ApiError(kit.CodeKeyInvalid, "Idempotency-Key", "x"), 400, "invalid_idempotency_key"},
		{kit.ApiError(kit.CodeKeyReused, "Idempotency-Key", "x"), 409, "invalid_idempotent_request"},
		{kit.ApiError(kit.CodeKeyInUse, "Idempotency-Key", "x"), 409, "concurrent_idempotent_requests"},
		{core.Errorf(core.CodeValidation, "to", "bad"), 422, "validation_error"},
		{core.ErrNotFound, 404, "not_found"},
		{kit.ApiError(kit.CodePayloadTooLarge, "", "x"), 413, "payload_too_large"},
		{errors.New("boom"), 500, "internal_server_error"},
	} {
		status, body := kit.ResendErrors(r, logger, tt.err)
		b, ok := body.(kit.ResendError)
		if status != tt.status || !ok || b.Name != tt.name || b.StatusCode != tt.status {
			t.Errorf("%v: got %d %+v, want %d %s", tt.err, status, body, tt.status, tt.name)
		}
	}
}
