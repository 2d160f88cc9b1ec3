package smtptest

// Command is one step of a client's mail transaction, as the server saw
// it, in the order the Transcript keeps.
type Command struct {
	// Conn numbers the client's session (from 1, in the order their EHLO
	// or HELO arrived).
	Conn int
	// Verb is MAIL, RCPT, DATA (the message's data began) or RSET (a
	// transaction the client had opened with MAIL was discarded before
	// its data: by RSET, or a new EHLO).
	Verb string
	// Arg is MAIL's sender or RCPT's recipient; "" for the others.
	Arg string
}

// Transcript returns the commands of every mail transaction so far, in
// arrival order: what a test of a client's order of commands (an envelope
// said ahead of its data, a transaction abandoned with RSET) reads.
func (s *Server) Transcript() []Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Command(nil), s.transcript...)
}

// note adds a command of ss's connection to the transcript.
func (s *Server) note(ss *session, verb, arg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.transcript = append(s.transcript, Command{Conn: ss.connNo, Verb: verb, Arg: arg})
}
