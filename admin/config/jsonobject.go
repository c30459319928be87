package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// JSONObject is a JSON object that keeps its members in order, as cnsadm
// edits the configuration: the order of forward_zones is data (a NIC's
// zones are tried in file order, and CloudAPI takes the first inst.
// suffix as a new VM's dns_domain), so what cnsadm read is written back,
// to the file or to SAPI, in the order it was read, new members last.
//
// Its values are what encoding/json decodes into an any, except that
// objects are *JSONObject: nil, bool, float64, string, []any, *JSONObject.
type JSONObject struct {
	keys []string
	vals map[string]any
}

// NewJSONObject returns an empty object.
func NewJSONObject() *JSONObject { return &JSONObject{vals: map[string]any{}} }

// Keys returns the members' names in order.
func (o *JSONObject) Keys() []string { return slices.Clone(o.keys) }

// Len is the number of members.
func (o *JSONObject) Len() int { return len(o.keys) }

// Get returns a member's value.
func (o *JSONObject) Get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// Value returns a member's value, nil when absent.
func (o *JSONObject) Value(k string) any { return o.vals[k] }

// Object returns a member that is an object, nil when it is absent or not
// an object.
func (o *JSONObject) Object(k string) *JSONObject {
	v, _ := o.vals[k].(*JSONObject)
	return v
}

// Set sets a member: in its place when it exists, last when it is new.
func (o *JSONObject) Set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

// Delete removes a member.
func (o *JSONObject) Delete(k string) {
	if _, ok := o.vals[k]; !ok {
		return
	}
	delete(o.vals, k)
	o.keys = slices.DeleteFunc(o.keys, func(x string) bool { return x == k })
}

// Rename gives member old the name new, in old's place (a member named
// new already is replaced).
func (o *JSONObject) Rename(old, new string) {
	v, ok := o.vals[old]
	if !ok || old == new {
		return
	}
	o.Delete(new)
	delete(o.vals, old)
	o.keys[slices.Index(o.keys, old)] = new
	o.vals[new] = v
}

// MarshalJSON writes the members in order.
func (o *JSONObject) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		vb, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(vb)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads an object, keeping the order of its members and of
// the members of every object inside it. A repeated name keeps its first
// place and its last value, as encoding/json keeps the last.
func (o *JSONObject) UnmarshalJSON(data []byte) error {
	v, err := DecodeJSON(data)
	if err != nil {
		return err
	}
	obj, ok := v.(*JSONObject)
	if !ok {
		return fmt.Errorf("want a JSON object, got %s", jsonKind(v))
	}
	*o = *obj
	return nil
}

// DecodeJSON decodes one JSON value, objects as *JSONObject.
func DecodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("invalid JSON: data after the value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := t.(json.Delim)
	if !ok {
		return t, nil // nil, bool, float64 or string
	}
	switch d {
	case '{':
		o := NewJSONObject()
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			o.Set(kt.(string), v)
		}
		_, err := dec.Token() // '}'
		return o, err
	case '[':
		list := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token() // ']'
		return list, err
	}
	return nil, fmt.Errorf("invalid JSON: unexpected %v", d)
}

// jsonKind names a decoded value's JSON type, for messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	}
	return "an object"
}
