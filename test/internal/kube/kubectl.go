package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
)

// Kubectl runs kubectl against one cluster.
type Kubectl struct {
	// Binary is the kubectl binary; empty: kubectl on PATH.
	Binary     string
	Kubeconfig string
	// Wrap, when set, is the command kubectl runs under (for example nsenter into a network namespace).
	Wrap []string
}

// Run runs kubectl with args (stdin, if not nil), returning its stdout; the error carries its stderr.
func (k Kubectl) Run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	bin := k.Binary
	if bin == "" {
		bin = "kubectl"
	}
	argv := append(append(append([]string{}, k.Wrap...), bin, "--kubeconfig", k.Kubeconfig), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// GetJSON reads the objects `kubectl get args -o json` prints into v.
func (k Kubectl) GetJSON(ctx context.Context, v any, args ...string) error {
	out, err := k.Run(ctx, nil, append(append([]string{"get"}, args...), "-o", "json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("kubectl get %s: %w", strings.Join(args, " "), err)
	}
	return nil
}
