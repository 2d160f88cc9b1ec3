package smtptest

import (
	"time"

	"github.com/emersion/go-smtp"
)

// limitState is what Options.MaxMessagesPerConn and MaxRate need: the
// window of the rate, and what the server saw.
type limitState struct {
	windowStart time.Time
	inWindow    int
	throttled   int
	peakPerConn int
}

// checkLimits answers MAIL as a provider past its limits would (with
// s.mu not held).
func (s *Server) checkLimits(ss *session) error {
	if max := s.opts.MaxMessagesPerConn; max > 0 && ss.msgs >= max {
		s.mu.Lock()
		s.limits.throttled++
		s.mu.Unlock()
		ss.conn.Conn().Close()
		return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Too many messages on this connection, try again later"}
	}
	if s.opts.MaxRate <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if now.Sub(s.limits.windowStart) >= time.Second {
		s.limits.windowStart, s.limits.inWindow = now, 0
	}
	if float64(s.limits.inWindow) >= s.opts.MaxRate {
		s.limits.throttled++
		return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 28},
			Message: "Our system has detected an unusual rate of unsolicited mail originating from your IP address. To protect our users from spam, mail sent from your IP address has been temporarily rate limited."}
	}
	s.limits.inWindow++
	return nil
}

// tookMessage counts a message a session carried.
func (s *Server) tookMessage(ss *session) {
	ss.msgs++
	s.mu.Lock()
	s.limits.peakPerConn = max(s.limits.peakPerConn, ss.msgs)
	s.mu.Unlock()
}

// Throttled returns the MAILs answered 421 past MaxMessagesPerConn or
// MaxRate.
func (s *Server) Throttled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limits.throttled
}

// PeakMessagesPerConn returns the most messages one connection carried.
func (s *Server) PeakMessagesPerConn() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limits.peakPerConn
}
