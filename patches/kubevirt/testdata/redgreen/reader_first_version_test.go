package network

// The first version of 0002 (before the node specs) read <pods dir>/<pod of vmi.status.activePods>/volumes
// directly, in the reader's own mount namespace: hostRoot does not exist for it.
func (n *nodeLayout) reader(_ string) *BindingPluginCacheReader {
	return NewBindingPluginCacheReader(n.kubeletPodsDir)
}
