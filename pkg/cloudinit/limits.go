package cloudinit

import (
	"fmt"

	yaml "go.yaml.in/yaml/v3"
)

// Limits on the user's networkData, which anyone who can create a VMI controls, while the sidecar has a
// fixed memory limit. Past a limit is an error naming the source and the limit; within them the merge
// costs bounded memory and time (docs/footprint.md "What a hook call may carry"). Real network configs
// are far inside: 64 fully configured NICs are about 3,000 YAML nodes, nested 6 deep.
const (
	// MaxNetworkDataBytes is the largest networkData accepted, the size of a Kubernetes Secret.
	MaxNetworkDataBytes = 1 << 20
	// MaxNestingDepth bounds how deeply collections nest (YAML and JSON).
	MaxNestingDepth = 64
	// MaxNodes bounds the YAML nodes (every key, value and collection; aliases count once) and the
	// JSON values (keys included) of a document.
	MaxNodes = 10000
	// MaxYAMLAliases bounds the aliases (*name) in a YAML document.
	MaxYAMLAliases = 1000
	// MaxMergeExpansion bounds the mappings that YAML merge keys ("<<") make the merge visit, summed
	// over the whole document (merges of merges are not bounded by the node count).
	MaxMergeExpansion = 100000
)

// sizeLimit rejects a document larger than MaxNetworkDataBytes; callers prefix the source.
func sizeLimit(n int) error {
	if n > MaxNetworkDataBytes {
		return fmt.Errorf("size %d bytes exceeds %d (the limit of a Secret)", n, MaxNetworkDataBytes)
	}
	return nil
}

// checkJSONLimits scans a JSON document once, without building anything, and rejects it when it is
// larger, deeper or has more values than the limits. json.Unmarshal validates it afterwards.
func checkJSONLimits(data []byte) error {
	if err := sizeLimit(len(data)); err != nil {
		return err
	}
	depth, nodes := 0, 0
	inString, escaped := false, false
	valueStart := true // the next non-blank byte may start a value
	for i, c := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '"':
			inString = true
			nodes++
		case '{', '[':
			depth++
			nodes++
			if depth > MaxNestingDepth {
				return fmt.Errorf("nesting depth exceeds %d at byte %d", MaxNestingDepth, i)
			}
		case '}', ']':
			depth--
		default:
			if valueStart && c != ',' && c != ':' {
				nodes++ // a number, true, false or null
			}
		}
		valueStart = c == ',' || c == ':' || c == '[' || c == '{'
		if nodes > MaxNodes {
			return fmt.Errorf("more than %d values (keys included) at byte %d", MaxNodes, i)
		}
	}
	return nil
}

// maxYAMLTokens bounds the pre-scan's count: the decoder builds at most about 2*maxYAMLTokens nodes
// before checkYAMLTree counts them exactly. Real documents have 1.2-1.6 tokens per node.
const maxYAMLTokens = 2 * MaxNodes

// countYAMLTokens counts data's tokens, stopping at the byte where the count passes limit: words (runs of
// non-blank bytes, split at flow indicators), flow indicators, and block indicators ("- ", ": ", "? ")
// once more for the empty value that may follow them. Words in comments and quoted scalars count too: a
// scanner that guessed where those end wrong could skip a line full of nodes. Every node yaml.v3 builds
// is paid for by at most two tokens (FuzzCountYAMLTokens).
func countYAMLTokens(data []byte, limit int) (tokens, at int) {
	prevBlank := true // at the start of a line or after a blank
	for i, c := range data {
		switch {
		case isYAMLBlank(c):
			prevBlank = true
			continue
		case c == '[' || c == '{' || c == ',' || c == ']' || c == '}':
			tokens++
			prevBlank = true // a flow indicator ends a plain scalar and may start the next
		case (c == '-' || c == ':' || c == '?') && (i+1 == len(data) || isYAMLBlank(data[i+1])):
			tokens += 2
			prevBlank = false
		case prevBlank:
			tokens++
			prevBlank = false
		}
		if tokens > limit {
			return tokens, i
		}
	}
	return tokens, len(data)
}

func isYAMLBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// decodeYAMLWithinLimits is decodeYAML within the limits: size and token count before the parser runs
// (yaml.v3 builds every node of a document before returning any), checkYAMLTree after.
func decodeYAMLWithinLimits(data []byte) (*yaml.Node, error) {
	if err := sizeLimit(len(data)); err != nil {
		return nil, err
	}
	if tokens, at := countYAMLTokens(data, maxYAMLTokens); tokens > maxYAMLTokens {
		return nil, fmt.Errorf("more than %d YAML tokens (words, including those of comments and quoted text, and indicators; limit: %d nodes) at byte %d", maxYAMLTokens, MaxNodes, at)
	}
	doc, err := decodeYAML(data)
	if err != nil || doc == nil {
		return nil, err
	}
	if err := checkYAMLTree(doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// checkYAMLTree counts the parsed document exactly: nodes (an alias is one node, never expanded),
// nesting depth and aliases.
func checkYAMLTree(doc *yaml.Node) error {
	var nodes, aliases int
	var walk func(n *yaml.Node, depth int) error
	walk = func(n *yaml.Node, depth int) error {
		nodes++
		switch {
		case nodes > MaxNodes:
			return fmt.Errorf("more than %d nodes (line %d)", MaxNodes, n.Line)
		case depth > MaxNestingDepth:
			return fmt.Errorf("nesting depth exceeds %d (line %d)", MaxNestingDepth, n.Line)
		case n.Kind == yaml.AliasNode:
			if aliases++; aliases > MaxYAMLAliases {
				return fmt.Errorf("more than %d aliases (line %d)", MaxYAMLAliases, n.Line)
			}
		}
		for _, c := range n.Content {
			if err := walk(c, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(doc, 0)
}
