package httpapi

import (
	_ "embed"
	"net/http"

	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// openAPI is the OpenAPI 3.1 document of every route, served at
// /openapi.json. TestOpenAPI_CoversEveryRoute holds it against routes().
//
//go:embed openapi.json
var openAPI []byte

func handleOpenAPI(w http.ResponseWriter, _ *http.Request) {
	kit.WriteRaw(w, http.StatusOK, "application/json", openAPI)
}

// patternMux records the patterns routes registers.
type patternMux struct {
	*http.ServeMux
	patterns []string
}

func (m *patternMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

func (m *patternMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.HandleFunc(pattern, h)
}
