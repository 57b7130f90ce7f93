package memlimit

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestInit_SetsTheSoftLimitUnlessTheEnvironmentDoes(t *testing.T) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		t.Skipf("GOMEMLIMIT=%s is set in the environment: the package leaves it alone, nothing to check", v)
	}
	assert.Equal(t, int64(Limit), debug.SetMemoryLimit(-1))
}
