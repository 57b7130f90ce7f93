package cloudinit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	yaml "go.yaml.in/yaml/v3"
)

// The JSON writers: what we render (nodeJSON), network_data.json (writeNetworkData) and KubeVirt's
// CloudInitData (encodeObject).

// encodeObject writes a JSON object with sorted keys from values that are JSON already, as encoding/json
// does, without HTML escaping: virt-launcher's json.Marshal wrote every '<', '>' and '&' of the user data as
// \u003c and the like already, and escaping again what we compose would grow an HTML user data sixfold, past
// the 4 MiB answer virt-launcher receives.
func encodeObject(obj map[string]json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, fmt.Errorf("encoding JSON: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// writeNetworkData writes network_data.json: top-level keys sorted, one list entry per line, our
// entries indented, the user's values compacted as they came (never re-indented: indenting a value
// nested d deep writes d levels of indentation on each of its lines, so output and memory grew with
// the square of the depth, issue 15). lists replace the top-level keys they name; the first
// ours[key] entries of a list are ours (they come before the user's: oursFirst), the rest the user's.
func writeNetworkData(top map[string]json.RawMessage, lists map[string][]json.RawMessage, ours map[string]int) ([]byte, error) {
	keys := make([]string, 0, len(top)+len(lists))
	size := 16
	for k, v := range top {
		if _, ok := lists[k]; !ok {
			keys = append(keys, k)
			size += len(k) + len(v) + 8
		}
	}
	for k, l := range lists {
		keys = append(keys, k)
		for _, v := range l {
			size += len(v) + 8
		}
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	err := writeObjectMembers(buf, keys, "\n  ", ": ", func(k string) error {
		list, isList := lists[k]
		if !isList {
			if err := json.Compact(buf, top[k]); err != nil {
				return fmt.Errorf("%q: %w", k, err)
			}
			return nil
		}
		if len(list) == 0 {
			buf.WriteString("[]")
			return nil
		}
		buf.WriteByte('[')
		for j, v := range list {
			if j > 0 {
				buf.WriteByte(',')
			}
			buf.WriteString("\n    ")
			var err error
			if j < ours[k] {
				err = json.Indent(buf, v, "    ", "  ") // ours: a few levels deep
			} else {
				err = json.Compact(buf, v)
			}
			if err != nil {
				return fmt.Errorf("%q entry %d: %w", k, j, err)
			}
		}
		buf.WriteString("\n  ]")
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(keys) > 0 {
		buf.WriteByte('\n')
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}

// nodeJSON serialises a node tree we built (mappings, sequences, and !!str/!!int/!!bool scalars) as
// indented JSON; strings go through encoding/json.
func nodeJSON(root *yaml.Node) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeNodeJSON(&buf, root); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("encoding JSON: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func writeNodeJSON(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSONString(buf, n.Content[i].Value); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeNodeJSON(buf, n.Content[i+1]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeNodeJSON(buf, c); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return writeJSONString(buf, n.Value)
		case "!!int":
			if _, err := strconv.Atoi(n.Value); err != nil {
				return fmt.Errorf("encoding JSON: integer %q: %w", n.Value, err)
			}
			buf.WriteString(n.Value)
		case "!!bool":
			if n.Value != "true" && n.Value != "false" {
				return fmt.Errorf("encoding JSON: boolean %q", n.Value)
			}
			buf.WriteString(n.Value)
		default:
			return fmt.Errorf("encoding JSON: scalar with tag %q", n.Tag)
		}
	default:
		return fmt.Errorf("encoding JSON: node kind %d", n.Kind)
	}
	return nil
}

// writeObjectMembers sorts keys and writes '{' and the members: each as sep, the quoted key, colon and
// what value writes. The caller writes the closing brace (and any layout before it).
func writeObjectMembers(buf *bytes.Buffer, keys []string, sep, colon string, value func(key string) error) error {
	sort.Strings(keys)
	buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(sep)
		if err := writeJSONString(buf, k); err != nil {
			return err
		}
		buf.WriteString(colon)
		if err := value(k); err != nil {
			return err
		}
	}
	return nil
}

func writeJSONString(buf *bytes.Buffer, s string) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return fmt.Errorf("encoding JSON: %w", err)
	}
	buf.Truncate(buf.Len() - 1) // Encode appends a newline
	return nil
}
