package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
)

// Request bodies decoded strictly, into the API's errors.

// decodeStrict decodes a JSON object into v. Unknown fields are refused
// (422), so that a misspelt field ("suject") is not silently dropped.
func decodeStrict(body []byte, v any) error {
	if len(body) >= largeJSON {
		return decodeLarge(body, v)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	return decodeError(dec, err)
}

// decodeError maps a strict decode's outcome to the API's errors.
func decodeError(dec *json.Decoder, err error) error {
	if err == nil {
		if dec.More() {
			return apiError(core.CodeInvalidJSON, "", "the request body must be a single JSON object")
		}
		return nil
	}
	var (
		typeErr *json.UnmarshalTypeError
		synErr  *json.SyntaxError
	)
	switch {
	case errors.As(err, &synErr), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return apiError(core.CodeInvalidJSON, "", "the request body is not valid JSON")
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return apiError(core.CodeValidation, "", "the request body must be a JSON object")
		}
		if typeErr.Type == addrListType {
			return apiError(core.CodeValidation, typeErr.Field, typeErr.Field+" must be a string or an array of strings")
		}
		return apiError(core.CodeValidation, typeErr.Field, fmt.Sprintf("%s must be of type %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String())))
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return apiError(core.CodeValidation, name, fmt.Sprintf("unknown field %q", name))
	}
	// Errors from a field's own UnmarshalJSON (addrList) land here.
	return apiError(core.CodeValidation, "", "invalid request: "+err.Error())
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "string"
	case "map", "struct":
		return "object"
	case "slice", "array":
		return "array"
	case "bool":
		return "boolean"
	}
	return "number"
}

// jsonValueKind names the kind of a JSON value for an error message.
func jsonValueKind(b []byte) string {
	if len(b) == 0 {
		return "value"
	}
	switch b[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	}
	return "number"
}
