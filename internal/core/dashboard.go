package core

import "time"

// DashboardSession is a signed-in browser of the web dashboard. The cookie
// holds a random token; only its hash (ID) is stored.
type DashboardSession struct {
	ID        string // hex SHA-256 of the cookie's token
	Tenant    string
	APIKeyID  string
	CSRF      string
	CreatedAt time.Time
	SeenAt    time.Time
}

// DaySendCount is how many of a tenant's sends created on one UTC day are
// in one status now: the dashboard's overview.
type DaySendCount struct {
	Day    time.Time // midnight UTC
	Status Status
	N      int
}
