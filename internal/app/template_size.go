package app

import (
	"reflect"
)

// What a builtin reads is counted before it formats anything: one call
// may name the same large variable many times ({{print $x $x $x …}}), or
// a request's variable of megabytes, and fmt builds the whole result
// before the budget could see it.

// maxCallArgs bounds the arguments of one call in a template: a stored
// message template has no use for more, and each is a chance to repeat a
// large value.
const maxCallArgs = 32

// maxVariableBytes bounds the request's variables of one render (what
// fmt's %v would make of them): html/template escapes each value it
// writes into a new string before the output cap sees it, so a variable
// larger than the render may make is refused before any of it is read.
const maxVariableBytes = maxProducedBytes

// scalarSize bounds what %v makes of a number, a bool or nil
// ("-1.7976931348623157e+308" is 24 bytes).
const scalarSize = 32

// maxSizeDepth bounds the nesting inputSize follows (request bodies are
// at most 64 levels deep); anything deeper counts as too large.
const maxSizeDepth = 100

// inputsSize is an upper bound on what fmt's %v makes of args, counting
// at most about limit: past it, it stops and returns more than limit, so
// its own work is bounded by the budget too.
func inputsSize(args []any, limit int) int {
	n := 0
	for _, a := range args {
		n += 1 + inputSize(a, limit-n, 0) // +1: print's and println's separators
		if n > limit {
			return n
		}
	}
	return n
}

// inputSize is inputsSize for one value. The types of decoded JSON are
// counted directly; anything else through reflect.
func inputSize(v any, limit, depth int) int {
	if depth > maxSizeDepth {
		return limit + 1
	}
	switch v := v.(type) {
	case nil, bool, float64, int, int64:
		return scalarSize
	case string:
		return len(v)
	case []any:
		n := 2 // [ ]
		for _, e := range v {
			if n += 1 + inputSize(e, limit-n, depth+1); n > limit {
				return n
			}
		}
		return n
	case map[string]any:
		n := 5 // map[ ]
		for k, e := range v {
			if n += len(k) + 2 + inputSize(e, limit-n, depth+1); n > limit {
				return n
			}
		}
		return n
	}
	return reflectSize(reflect.ValueOf(v), limit, depth)
}

// reflectSize is inputSize for values that are not decoded JSON.
func reflectSize(v reflect.Value, limit, depth int) int {
	if depth > maxSizeDepth {
		return limit + 1
	}
	switch v.Kind() {
	case reflect.String:
		return v.Len()
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return scalarSize
		}
		return scalarSize + reflectSize(v.Elem(), limit, depth+1)
	case reflect.Slice, reflect.Array:
		n := 2
		for i := 0; i < v.Len(); i++ {
			if n += 1 + reflectSize(v.Index(i), limit-n, depth+1); n > limit {
				return n
			}
		}
		return n
	case reflect.Map:
		n := 5
		for it := v.MapRange(); it.Next(); {
			if n += 2 + reflectSize(it.Key(), limit-n, depth+1) + reflectSize(it.Value(), limit-n, depth+1); n > limit {
				return n
			}
		}
		return n
	case reflect.Struct:
		n := 2
		for i := 0; i < v.NumField(); i++ {
			if n += 1 + reflectSize(v.Field(i), limit-n, depth+1); n > limit {
				return n
			}
		}
		return n
	}
	return scalarSize
}
