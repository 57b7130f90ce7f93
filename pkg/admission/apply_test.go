package admission

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// applyAdds applies an RFC 6902 patch of "add" operations (all PodInfoPatch makes) to the JSON document doc,
// as kube-apiserver would: a test oracle that knows nothing of pods. Any other operation is an error.
func applyAdds(doc, patch []byte) ([]byte, error) {
	var root any
	if err := json.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("decode the document: %w", err)
	}
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return nil, fmt.Errorf("decode the patch: %w", err)
	}
	for _, op := range ops {
		if op.Op != "add" || !strings.HasPrefix(op.Path, "/") {
			return nil, fmt.Errorf("op %q path %q: only add with an absolute path", op.Op, op.Path)
		}
		var value any
		if err := json.Unmarshal(op.Value, &value); err != nil {
			return nil, fmt.Errorf("op %s: value: %w", op.Path, err)
		}
		var err error
		if root, err = addAt(root, strings.Split(op.Path[1:], "/"), value); err != nil {
			return nil, fmt.Errorf("op add %s: %w", op.Path, err)
		}
	}
	return json.Marshal(root)
}

// addAt adds value at path below node and returns the new node (a slice grows).
func addAt(node any, path []string, value any) (any, error) {
	key := path[0]
	switch n := node.(type) {
	case map[string]any:
		if len(path) == 1 {
			n[key] = value
			return n, nil
		}
		child, ok := n[key]
		if !ok {
			return nil, fmt.Errorf("no member %q", key)
		}
		next, err := addAt(child, path[1:], value)
		n[key] = next
		return n, err
	case []any:
		if len(path) == 1 {
			if key == "-" {
				return append(n, value), nil
			}
			return nil, fmt.Errorf("insert at %q: only appends are made", key)
		}
		i, err := strconv.Atoi(key)
		if err != nil || i < 0 || i >= len(n) {
			return nil, fmt.Errorf("index %q out of %d", key, len(n))
		}
		n[i], err = addAt(n[i], path[1:], value)
		return n, err
	default:
		return nil, fmt.Errorf("%q below a %T", key, node)
	}
}
