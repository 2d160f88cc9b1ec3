package submission

import (
	"errors"

	"github.com/emersion/go-sasl"
)

// loginServer is the server side of AUTH LOGIN (draft-murchison-sasl-login),
// which go-sasl offers only as a client: many SMTP clients (nodemailer,
// Outlook, older PHP mailers) still prefer it to PLAIN.
type loginServer struct {
	check    func(password string) error
	step     int
	username string
}

func newLoginServer(check func(password string) error) sasl.Server {
	return &loginServer{check: check}
}

// Next implements sasl.Server: ask for the user name, then the password
// (an initial response, if the client sent one, is the user name).
func (l *loginServer) Next(response []byte) (challenge []byte, done bool, err error) {
	switch l.step {
	case 0:
		l.step = 1
		if response == nil {
			return []byte("Username:"), false, nil
		}
		fallthrough
	case 1:
		l.username, l.step = string(response), 2
		return []byte("Password:"), false, nil
	case 2:
		l.step = 3
		return nil, true, l.check(string(response))
	}
	return nil, false, errors.New("AUTH LOGIN: unexpected response")
}
