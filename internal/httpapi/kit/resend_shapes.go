package kit

// ResendList is Resend's list object. Emails and suppressions page
// (has_more); the other lists answer every item at once, so has_more is
// false and the pagination parameters change nothing.
type ResendList[T any] struct {
	Object  string `json:"object"`
	HasMore bool   `json:"has_more"`
	Data    []T    `json:"data"`
}

type ResendDeleted struct {
	Object  string `json:"object"`
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}
