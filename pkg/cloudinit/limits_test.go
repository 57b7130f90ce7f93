package cloudinit

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"
)

// allocated returns the bytes allocated while f runs: an upper bound on what f can add to the heap.
// TotalAlloc is cumulative, so no collection is needed first (the fuzz targets call this per input).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// nestedJSON is depth levels of [ ... ] around a number.
func nestedJSON(depth int) string {
	return strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth)
}

// The user's network_data.json is not re-indented, so the output grows with the input,
// not with the square of its nesting depth.
func TestMergeNetworkDataJSON_NestedUserValues_OutputGrowsWithTheInputOnly(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"links":[],"deep":[`)
	for i := 0; b.Len() < 12<<10; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(nestedJSON(MaxNestingDepth - 3))
	}
	b.WriteString("]}")
	user := []byte(b.String())
	ours, err := renderNetworkDataJSON(mergeIfaces())
	require.NoError(t, err)

	out, err := MergeNetworkDataJSON(user, mergeIfaces())
	require.NoError(t, err)
	assert.LessOrEqual(t, len(out), len(user)+len(ours), "output %d bytes for %d bytes of user data", len(out), len(user))
	require.NoError(t, userJSONPreserved(user, out))
}

// Past the documented depth, an error names the source and the limit.
func TestMergeNetworkDataJSON_NestingPastTheLimit_IsRejectedNamingSourceAndLimit(t *testing.T) {
	for _, depth := range []int{MaxNestingDepth + 1, 4000, 9000} {
		user := fmt.Sprintf(`{"links":[],"x":%s}`, nestedJSON(depth-1))
		var err error
		alloc := allocated(func() { _, err = MergeNetworkDataJSON([]byte(user), mergeIfaces()) })
		require.Error(t, err, "depth %d", depth)
		assert.Contains(t, err.Error(), "configDrive networkData")
		assert.Contains(t, err.Error(), fmt.Sprintf("nesting depth exceeds %d", MaxNestingDepth))
		assert.Less(t, alloc, uint64(1<<20), "depth %d: rejecting allocated %d bytes", depth, alloc)
	}
}

// bigV2 is a v2 document of about size bytes with n-th entries like a real NIC's.
func bigV2(size int) string {
	var b strings.Builder
	b.WriteString("version: 2\nethernets:\n")
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "  e%d: {dhcp4: true, addresses: [10.0.0.1/24, 10.0.0.2/24], match: {macaddress: \"02:00:00:00:%02x:%02x\"}}\n", i, i>>8&0xff, i&0xff)
	}
	return b.String()
}

// mergeKeyChain is n v2 entries, each merging the one before it: the shape that took 10 s at 428 KB.
func mergeKeyChain(n int) string {
	var b strings.Builder
	b.WriteString("version: 2\nethernets:\n  e0: &a0 {dhcp4: true}\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "  e%d: &a%d {<<: *a%d}\n", i, i, i-1)
	}
	return b.String()
}

// A large v2 document past the node limit is rejected before it costs memory; one
// within every limit costs a bounded multiple of its size.
func TestMergeNoCloud_LargeDocuments_BoundedMemoryOrRejectedNamingTheLimit(t *testing.T) {
	for _, size := range []int{454 << 10, MaxNetworkDataBytes - 200} {
		user := []byte(bigV2(size))
		var err error
		alloc := allocated(func() { _, err = MergeNoCloud(user, mergeIfaces()) })
		require.Error(t, err, "%d bytes", len(user))
		assert.Contains(t, err.Error(), "noCloud networkData")
		assert.Contains(t, err.Error(), "nodes")
		assert.Less(t, alloc, uint64(16<<20), "%d bytes: rejecting allocated %d KiB", len(user), alloc>>10)
	}
	// Within the limits: as many entries as fit.
	user := []byte(bigV2(45 << 10))
	var err error
	alloc := allocated(func() { _, err = MergeNoCloud(user, mergeIfaces()) })
	require.NoError(t, err)
	t.Logf("%d bytes within the limits: merge allocated %d KiB", len(user), alloc>>10)
	assert.Less(t, alloc, uint64(24<<20), "%d bytes: merge allocated %d KiB", len(user), alloc>>10)
}

// Merge keys cost work bounded by a documented expansion limit, never quadratic time.
func TestMergeNoCloud_MergeKeyChains_RejectedPastTheExpansionLimit(t *testing.T) {
	user := []byte(mergeKeyChain(15000)) // ~428 KB
	var err error
	alloc := allocated(func() { _, err = MergeNoCloud(user, mergeIfaces()) })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "noCloud networkData")
	assert.Less(t, alloc, uint64(16<<20), "rejecting allocated %d KiB", alloc>>10)

	// A chain within the alias limit but long enough to expand past the merge budget.
	user = []byte(mergeKeyChain(MaxYAMLAliases))
	_, err = MergeNoCloud(user, mergeIfaces())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "noCloud networkData")
	assert.Contains(t, err.Error(), "merge keys")
}

// Every limit applies to both formats and to the whole input size.
func TestMerge_InputPastTheSizeLimit_IsRejectedNamingSourceAndLimit(t *testing.T) {
	big := strings.Repeat(" ", MaxNetworkDataBytes) + "{}"
	_, err := MergeNetworkDataJSON([]byte(big), mergeIfaces())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "configDrive networkData")
	assert.Contains(t, err.Error(), "exceeds")
	_, err = MergeNoCloud([]byte("version: 2\n#"+big), mergeIfaces())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "noCloud networkData")
	assert.Contains(t, err.Error(), "exceeds")

	// YAML nesting and aliases.
	_, err = MergeNoCloud([]byte("version: 2\nx: "+nestedJSON(MaxNestingDepth+1)+"\n"), mergeIfaces())
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("nesting depth exceeds %d", MaxNestingDepth))
	var b strings.Builder
	b.WriteString("version: 2\na: &a x\nl: [")
	for i := 0; i <= MaxYAMLAliases; i++ {
		b.WriteString("*a, ")
	}
	b.WriteString("]\n")
	_, err = MergeNoCloud([]byte(b.String()), mergeIfaces())
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("more than %d aliases", MaxYAMLAliases))
}

// A user document within the limits keeps working, JSON included, and its values are kept as written.
func TestMergeNetworkDataJSON_LargestLegalInput_BoundedAllocation(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"links":[`)
	for i := 0; b.Len() < MaxNetworkDataBytes-64<<10; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"l%d","type":"phy","ethernet_mac_address":"02:00:00:00:%02x:%02x","mtu":1500,"note":"%s"}`, i, i>>8&0xff, i&0xff, strings.Repeat("n", 4000))
	}
	b.WriteString(`]}`)
	user := []byte(b.String())
	var out []byte
	var err error
	alloc := allocated(func() { out, err = MergeNetworkDataJSON(user, mergeIfaces()) })
	require.NoError(t, err)
	assert.True(t, json.Valid(out))
	assert.Less(t, alloc, uint64(8*len(user)), "allocated %d KiB for %d KiB", alloc>>10, len(user)>>10)
}

// The pre-scan counts what a quote, a block scalar or a '#' might hide: a scanner that skipped quoted
// text or comments by its own reading could be made to skip a line the parser reads as 40,000 nodes.
func TestMergeNoCloud_QuotesAndCommentsCannotHideNodesFromThePreScan(t *testing.T) {
	list := "a" + strings.Repeat(",a", 40000)
	for name, user := range map[string]string{
		"quote in a block scalar": "version: 2\nx: |\n  \"\ny: [" + list + "]\nz: \"\n",
		"'#' in a quoted scalar":  "version: 2\nx: [\"abc #x\", " + list + "]\n",
		"quote inside a word":     "version: 2\nx: it 'x\ny: [" + list + "]\nz: y'\n",
	} {
		var err error
		alloc := allocated(func() { _, err = MergeNoCloud([]byte(user), mergeIfaces()) })
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "YAML tokens", name)
		assert.Less(t, alloc, uint64(1<<20), "%s: rejecting allocated %d KiB", name, alloc>>10)
	}
}

// FuzzCountYAMLTokens checks the pre-scan's promise: whatever yaml.v3 parses, it builds at most two
// nodes per counted token (plus the document node), so a document under the token limit cannot make
// the parser build more than 2*maxYAMLTokens nodes before checkYAMLTree counts them.
func FuzzCountYAMLTokens(f *testing.F) {
	for _, seed := range []string{
		"a:", "a:\n b:\n  c:\n", "- - - x", "{a,b,c}", "[a,,b]", "{? a}", "? a\n: b\n", "a: &x {b: *x}",
		"x: |\n  \"\ny: [a,a]\n", `{"a":"b","c":[1,2]}`, "- !!str\n- !!map {}", "a: [b: c, d: e]", "--- !!set\n? a\n? b\n",
		"<<: [*a, *b]", "[[[[]]]]", "{{}: {}}", "a: b #c\nd: e", "'a': 'b'", "? - a\n  - b\n: c",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		doc, err := decodeYAML([]byte(data))
		if err != nil || doc == nil {
			return
		}
		nodes := 0
		var walk func(n *yaml.Node)
		walk = func(n *yaml.Node) {
			nodes++
			for _, c := range n.Content {
				walk(c)
			}
		}
		walk(doc)
		tokens, _ := countYAMLTokens([]byte(data), len(data)*3)
		if nodes > 2*tokens+1 {
			t.Fatalf("%d nodes from %d tokens in %q", nodes, tokens, data)
		}
	})
}
