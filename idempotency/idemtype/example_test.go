package idemtype_test

import (
	"fmt"
	"time"

	"github.com/sendonce/sendonce/idempotency/idemtype"
)

// What a request with a key gets, by the record its store holds.
func ExampleDecide() {
	now := time.Unix(1_700_000_000, 0)
	done := &idemtype.Record{
		Fingerprint: "fp-1", State: idemtype.StateCompleted, ExpiresAt: now.Add(24 * time.Hour),
		Response: &idemtype.Response{Status: 201, ContentType: "application/json", Body: []byte(`{"id":"ord_1"}`)},
	}
	running := &idemtype.Record{Fingerprint: "fp-1", State: idemtype.StateInFlight, LockedUntil: now.Add(30 * time.Second)}

	fmt.Println("no record:      ", idemtype.Decide(nil, "fp-1", now))
	fmt.Println("same body:      ", idemtype.Decide(done, "fp-1", now))
	fmt.Println("other body:     ", idemtype.Decide(done, "fp-2", now))
	fmt.Println("after its TTL:  ", idemtype.Decide(done, "fp-2", now.Add(25*time.Hour)))
	fmt.Println("still running:  ", idemtype.Decide(running, "fp-1", now))
	fmt.Println("after its lease:", idemtype.Decide(running, "fp-1", now.Add(time.Minute)))
	// Output:
	// no record:       proceed
	// same body:       replay
	// other body:      mismatch
	// after its TTL:   proceed
	// still running:   in_use
	// after its lease: proceed
}
