package submission

// Fingerprint is the fingerprint a submission of msg in this envelope is
// decided with; keyHeader says whether its key came from a key header.
func Fingerprint(from string, rcpt []string, msg []byte, keyHeader bool) string {
	return fingerprint(envelope{from: from, rcpt: rcpt}, msg, keyHeader)
}

// LegacyFingerprint is the bytes fingerprint versions before stored
// (tests store records of it the way an older version did).
func LegacyFingerprint(from string, rcpt []string, msg []byte) string {
	return legacyFingerprint(envelope{from: from, rcpt: rcpt}, msg)
}
