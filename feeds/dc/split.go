package dc

import "encoding/json"

// Splitting a JSON document into its parts without decoding them, so the
// parts can be decoded apart (and in parallel): encoding/json would scan
// the whole document once to check it and once more for every level of
// json.RawMessage it is split into.

// splitObject returns the members of a JSON object by key (a repeated key:
// the last one, as encoding/json keeps), and false when data is not one
// valid JSON object.
func splitObject(data []byte) (map[string]json.RawMessage, bool) {
	if !json.Valid(data) {
		return nil, false
	}
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return nil, false
	}
	out := map[string]json.RawMessage{}
	for i = skipSpace(data, i+1); i < len(data) && data[i] != '}'; {
		end := stringEnd(data, i)
		var key string
		if json.Unmarshal(data[i:end], &key) != nil {
			return nil, false
		}
		i = skipSpace(data, end) + 1 // past ':'
		i = skipSpace(data, i)
		end = valueEnd(data, i)
		out[key] = data[i:end]
		i = skipSpace(data, end)
		if i < len(data) && data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return out, true
}

// splitArray returns the elements of raw, a valid JSON value, and false
// when it is not an array.
func splitArray(raw []byte) ([]json.RawMessage, bool) {
	i := skipSpace(raw, 0)
	if i == len(raw) || raw[i] != '[' {
		return nil, false
	}
	var out []json.RawMessage
	for i = skipSpace(raw, i+1); i < len(raw) && raw[i] != ']'; {
		end := valueEnd(raw, i)
		out = append(out, raw[i:end])
		i = skipSpace(raw, end)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return out, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the string starting at b[i] ('"').
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// valueEnd returns the index after the valid JSON value starting at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for i < len(b) { // a number, true, false or null
		switch b[i] {
		case ',', ']', '}', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}
