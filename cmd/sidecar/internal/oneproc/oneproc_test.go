package oneproc

import (
	"flag"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestInit_LeavesOneProcUnlessTheEnvironmentSaysOtherwise(t *testing.T) {
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		t.Skipf("GOMAXPROCS=%s is set in the environment: the package leaves it alone, nothing to check", v)
	}
	if f := flag.Lookup("test.cpu"); f != nil && f.Value.String() != "" {
		t.Skipf("-cpu %s sets GOMAXPROCS for each test: nothing to check", f.Value)
	}
	assert.Equal(t, 1, runtime.GOMAXPROCS(0))
}
