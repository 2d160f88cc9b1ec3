package kit

import (
	"fmt"

	"github.com/sendonce/sendonce/internal/core"
)

// The shape of a JSON body is bounded before anything decodes it.
//
// Decoding is what costs memory, not the bytes: `[0,0,0,…]` is two bytes
// an element on the wire and some fifty bytes an element once decoded
// into a map[string]any, then again in the canonical form the idempotency
// fingerprint builds. A 1 MiB body of it held over a gigabyte across 20
// concurrent requests. So one linear scan over the raw bytes counts what
// decoding would materialise and refuses, before any decoder runs, a body
// that nests too deep, has too large an array or object, or too many
// values in all. The limits sit far above what any request of the API
// needs (a batch of 100 sends, 50 addresses in each list, is some 20 000
// values).
const (
	// maxJSONDepth is the deepest nesting of arrays and objects.
	maxJSONDepth = 32
	// maxJSONElements is the most elements of one array or members of one
	// object.
	maxJSONElements = 10_000
	// maxJSONValues is the most values in the whole body, member names
	// included.
	maxJSONValues = 100_000
	// jsonValueCost is what one decoded value is charged against the
	// in-flight bound, in bytes, on top of the body's own size: an
	// interface, its boxed scalar or string header, and its share of the
	// growing slice or map, twice over (the decoded request and the
	// fingerprint's canonical form). TestJSONShape_HeavyBodyCountsInFlight
	// and the heap check of TestJSONShape_HostileBodiesRefused keep it
	// honest.
	jsonValueCost = 128
)

// jsonShape is what the scan counted of a body that passed it.
type jsonShape struct {
	values int // values and member names, about what decoding allocates
}

// cost is what a body of bodyLen bytes is charged against the in-flight
// bound, its bytes counted up to bodyCap: a large request's size is
// charged as bounded charged its declaration, capped at the large share.
func (sh jsonShape) cost(bodyLen, bodyCap int64) int64 {
	return min(bodyLen, bodyCap) + int64(sh.values)*jsonValueCost
}

// scanJSONShape counts the body's values without decoding it and refuses
// one beyond the limits with a 422 validation_error. It does not check the
// grammar (the decoder and the fingerprint do) and is right for valid JSON:
// outside strings, every value but the first in a container follows a
// comma, every member's value follows a colon, and every container opens
// with a bracket. Strings are skipped whole, so their content never
// counts.
func scanJSONShape(body []byte) (jsonShape, error) {
	var elems [maxJSONDepth + 1]int // commas seen in each open container
	depth, values := 0, 1
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '"':
			end := stringEnd(body, i+1)
			if end < 0 {
				return jsonShape{values: values}, nil // unterminated: the decoder reports it
			}
			i = end
		case '[', '{':
			if depth == maxJSONDepth {
				return jsonShape{}, ApiError(core.CodeValidation, "", fmt.Sprintf("the request body nests arrays and objects more than %d deep", maxJSONDepth))
			}
			depth++
			elems[depth] = 0
		case ']', '}':
			depth = max(depth-1, 0) // unbalanced: the decoder reports it
		case ',':
			elems[depth]++
			if elems[depth] >= maxJSONElements {
				return jsonShape{}, ApiError(core.CodeValidation, "", fmt.Sprintf("an array or object in the request body has more than %d elements", maxJSONElements))
			}
			values++
		case ':':
			values++
		default:
			continue
		}
		if values > maxJSONValues {
			return jsonShape{}, ApiError(core.CodeValidation, "", fmt.Sprintf("the request body has more than %d values", maxJSONValues))
		}
	}
	return jsonShape{values: values}, nil
}
