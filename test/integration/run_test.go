package integration

import (
	"os/exec"
	"testing"
	"time"
)

// runBinary runs the sidecar to completion and returns its combined output.
func runBinary(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(sidecarBin, args...)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%v did not exit", args)
	}
	return string(out), err
}
