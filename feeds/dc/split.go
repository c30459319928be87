package dc

import "encoding/json"

// Splitting a JSON document into its parts without decoding them, so the
// parts can be decoded apart (and in parallel): encoding/json would scan
// the whole document once to check it and once more for every level of
// json.RawMessage it is split into. The splitter checks the syntax of
// what it splits (braces, brackets, keys, colons and commas) but not the
// values it hands out: those are checked where they are decoded, and
// encoding/json's Unmarshal checks what it is given anyway. (Checking the
// whole document first took 1.3 s of a million-VM inventory's parse, on
// one core while the other waited.)

// splitObject returns the members of a JSON object by key (a repeated key:
// the last one, as encoding/json keeps), and false when data is not an
// object: its values are not checked.
func splitObject(data []byte) (map[string]json.RawMessage, bool) {
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return nil, false
	}
	out := map[string]json.RawMessage{}
	if i = skipSpace(data, i+1); i < len(data) && data[i] == '}' {
		return out, skipSpace(data, i+1) == len(data)
	}
	for i < len(data) && data[i] == '"' {
		end := stringEnd(data, i)
		var key string
		if json.Unmarshal(data[i:end], &key) != nil {
			return nil, false
		}
		if i = skipSpace(data, end); i == len(data) || data[i] != ':' {
			return nil, false
		}
		i = skipSpace(data, i+1)
		end, ok := valueEnd(data, i)
		if !ok {
			return nil, false
		}
		if prev, dup := out[key]; dup && !json.Valid(prev) {
			return nil, false // the value the later one hides is decoded nowhere
		}
		out[key] = data[i:end]
		if i = skipSpace(data, end); i == len(data) {
			return nil, false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return out, skipSpace(data, i+1) == len(data)
		default:
			return nil, false
		}
	}
	return nil, false
}

// splitArray returns the elements of raw, and false when it is not an
// array: its elements are not checked.
func splitArray(raw []byte) ([]json.RawMessage, bool) {
	i := skipSpace(raw, 0)
	if i == len(raw) || raw[i] != '[' {
		return nil, false
	}
	var out []json.RawMessage
	if i = skipSpace(raw, i+1); i < len(raw) && raw[i] == ']' {
		return out, skipSpace(raw, i+1) == len(raw)
	}
	for {
		end, ok := valueEnd(raw, i)
		if !ok {
			return nil, false
		}
		out = append(out, raw[i:end])
		if i = skipSpace(raw, end); i == len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case ']':
			return out, skipSpace(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
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

// valueEnd returns the index after the value starting at b[i], if it
// ends before b does: a string, an object or array whose brackets balance
// (not checking that they match), or a run of other characters up to a
// separator. false: no value starts at i, or it does not end.
func valueEnd(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		end := stringEnd(b, i)
		return end, end > i+1 && b[end-1] == '"'
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
					return i + 1, true
				}
			}
		}
		return 0, false
	}
	start := i
	for i < len(b) { // a number, true, false or null
		switch b[i] {
		case ',', ']', '}', ' ', '\t', '\n', '\r':
			return i, i > start
		}
		i++
	}
	return i, i > start
}
