package main

import (
	"fmt"
	"io"
)

// runRender is the operator's debugging tool: given a pod (kubectl get pod -o json) or a pod-info
// directory and a VMI, print what the sidecar would generate.
func runRender(_ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, "render: not yet implemented (guest network config generation lands with issue 4)")
	return 0
}
