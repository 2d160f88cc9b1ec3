package dashboard

// Route is a dashboard route as the tests see it.
type Route struct {
	Pattern string
	Scope   string
}

// Routes returns the route table, for the authorization tests.
func Routes() []Route {
	out := make([]Route, 0, len(routes))
	for _, r := range routes {
		out = append(out, Route{r.pattern, string(r.scope)})
	}
	return out
}

// SafeNext is safeNext, for its table test.
var SafeNext = safeNext
