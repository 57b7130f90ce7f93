package cloudinit

import (
	"encoding/json"
	"fmt"
)

// splitObject is json.Unmarshal into map[string]json.RawMessage without its copies: each value is a
// slice of data (so data must not change while the map is used). A CloudInitData carries the user data
// JSON-escaped, up to 6 MiB for a 1 MiB Secret (issue 30); a copy of it is memory the sidecar's limit
// cannot spare. A document that is not a JSON object gets encoding/json's own error.
func splitObject(data []byte) (map[string]json.RawMessage, error) {
	if !json.Valid(data) {
		var obj map[string]json.RawMessage
		return nil, json.Unmarshal(data, &obj)
	}
	i := skipJSONSpace(data, 0)
	switch data[i] {
	case 'n':
		return nil, nil // null
	case '{':
	default:
		var obj map[string]json.RawMessage
		return nil, json.Unmarshal(data, &obj) // the type error
	}
	obj := map[string]json.RawMessage{}
	i = skipJSONSpace(data, i+1)
	for data[i] != '}' {
		end := skipJSONValue(data, i)
		var key string
		if err := json.Unmarshal(data[i:end], &key); err != nil {
			return nil, fmt.Errorf("object key at byte %d: %w", i, err)
		}
		i = skipJSONSpace(data, end) + 1 // past ':'
		i = skipJSONSpace(data, i)
		end = skipJSONValue(data, i)
		obj[key] = data[i:end:end]
		i = skipJSONSpace(data, end)
		if data[i] == ',' {
			i = skipJSONSpace(data, i+1)
		}
	}
	return obj, nil
}

func skipJSONSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipJSONValue returns the end of the valid JSON value that starts at data[i].
func skipJSONValue(data []byte, i int) int {
	depth := 0
	for ; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			for i++; data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return i // the end of the enclosing object
			}
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}
