package submission

// Fingerprint is the fingerprint a submission of msg in this envelope is
// decided with (tests store records of it the way an older version did).
func Fingerprint(from string, rcpt []string, msg []byte) string {
	return fingerprint(envelope{from: from, rcpt: rcpt}, msg)
}
