package cloudinit

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	yaml "go.yaml.in/yaml/v3"
)

// What we render alone is JSON (marshalJSON): YAML that PyYAML reads with every string quoted, and far
// cheaper than yaml.v3's emitter, which keeps every event of a document in memory. Merging into the
// user's YAML goes through yaml.Node, so that their document comes out as PyYAML (YAML 1.1) read it: keys,
// order, comments, anchors, each scalar's style and tag (decoded into Go values under YAML 1.2,
// "dhcp4: yes" would change meaning), and every key we do not model.

// yamlNode is v as a node tree for the user's document, every string double-quoted: the yaml library
// writes plain what its YAML 1.2 resolver reads as a string, and to PyYAML a plain 52:54:00:12:34:56 is
// a base-60 integer.
func yamlNode(v any) (*yaml.Node, error) {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	quoteStrings(&n)
	return &n, nil
}

// quoteStrings double-quotes the string values under n; keys are our field names, written plain.
func quoteStrings(n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			quoteStrings(n.Content[i])
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			quoteStrings(c)
		}
	case yaml.ScalarNode:
		if n.Tag == "!!str" {
			n.Style = yaml.DoubleQuotedStyle
		}
	}
}

// quoted is a double-quoted string node: a key that comes from data (a v2 interface ID).
func quoted(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.DoubleQuotedStyle}
}

// encodeYAML emits a document with 2-space indentation. A panic the yaml library does not recover itself
// becomes an error: hostile input must never crash the sidecar (restartPolicy Never).
func encodeYAML(root *yaml.Node) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("encoding YAML: %v", r)
		}
	}()
	spellOutEmptyNulls(root, map[*yaml.Node]bool{})
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	return buf.Bytes(), nil
}

// spellOutEmptyNulls writes an empty null ("key:" with no value) as "null": the emitter cannot write an
// empty plain scalar in flow context ("{a}") and would quote it, turning the user's null into "".
func spellOutEmptyNulls(n *yaml.Node, seen map[*yaml.Node]bool) {
	if n == nil || seen[n] {
		return
	}
	seen[n] = true
	if n.Kind == yaml.ScalarNode && n.Value == "" && n.ShortTag() == "!!null" && n.Style&^yaml.TaggedStyle == 0 {
		n.Value = "null"
	}
	for _, c := range n.Content {
		spellOutEmptyNulls(c, seen)
	}
}

// decodeYAML parses exactly one YAML document (PyYAML's safe_load rejects a second); nil when it is empty.
func decodeYAML(data []byte) (doc *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			doc, err = nil, fmt.Errorf("parsing YAML: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var n yaml.Node
	if err := dec.Decode(&n); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("parsing YAML: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("parsing YAML: more than one document")
	} else if !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parsing YAML: %w", err)
	}
	if len(n.Content) == 0 {
		return nil, nil
	}
	return &n, nil
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// mergeBudget looks keys up in the mappings of one document, following aliases and YAML merge keys
// ("<<") as PyYAML does (an explicit key wins over merged ones). left bounds the merged mappings all
// lookups of the document visit (MaxMergeExpansion), and a lookup visits a mapping once: merges of
// merges cannot make the work exponential, nor a chain of them quadratic.
type mergeBudget struct{ left int }

func newMergeBudget() *mergeBudget { return &mergeBudget{left: MaxMergeExpansion} }

// exceeded reports whether a lookup was cut short; its answer may then be wrong.
func (b *mergeBudget) exceeded() bool { return b.left < 0 }

// lookup returns the value of key in mapping m; nil when absent or m is no mapping.
func (b *mergeBudget) lookup(m *yaml.Node, key string) *yaml.Node { return b.lookupIn(m, key, nil) }

// lookupIn looks key up in m and then in what m merges; visited keeps each mapping to one visit.
func (b *mergeBudget) lookupIn(m *yaml.Node, key string, visited map[*yaml.Node]bool) *yaml.Node {
	m = resolve(m)
	if m == nil || m.Kind != yaml.MappingNode || visited[m] {
		return nil
	}
	var found *yaml.Node
	hasMerge := false
	for i := 0; i+1 < len(m.Content); i += 2 {
		switch k := resolve(m.Content[i]); {
		case k == nil || k.Kind != yaml.ScalarNode:
		case k.ShortTag() == "!!merge":
			hasMerge = true
		case k.Value == key:
			found = m.Content[i+1] // PyYAML keeps the last duplicate
		}
	}
	if found != nil || !hasMerge {
		return found
	}
	if visited == nil {
		visited = map[*yaml.Node]bool{}
	}
	visited[m] = true
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := resolve(m.Content[i]); k == nil || k.Kind != yaml.ScalarNode || k.ShortTag() != "!!merge" {
			continue
		}
		sources := []*yaml.Node{resolve(m.Content[i+1])}
		if v := sources[0]; v != nil && v.Kind == yaml.SequenceNode {
			sources = v.Content
		}
		for _, s := range sources {
			if b.left <= 0 {
				b.left = -1
				return nil
			}
			b.left--
			if f := b.lookupIn(s, key, visited); f != nil {
				return f
			}
		}
	}
	return nil
}

// scalar returns the scalar value of n (after aliases) and whether it is a scalar.
func scalar(n *yaml.Node) (string, bool) {
	n = resolve(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		return "", false
	}
	return n.Value, true
}
