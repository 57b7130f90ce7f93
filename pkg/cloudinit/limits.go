package cloudinit

// Limits on the user's networkData (issue 15). The source is the VM owner's cloud-init volume or
// networkDataSecretRef: anyone who can create a VMI controls it, and the sidecar has a fixed memory
// limit. Everything past a limit is rejected with an error naming the source and the limit; within
// them the merge costs bounded memory and time (README "Limits"). Real network configs are far inside:
// 64 fully configured NICs are about 3,000 YAML nodes, nested 6 deep.
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
	// over the whole document: merge keys can refer to mappings that merge others, so the work is not
	// bounded by the node count alone.
	MaxMergeExpansion = 100000
)
