package oneproc

import (
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestInit_LeavesOneProcUnlessTheEnvironmentSaysOtherwise(t *testing.T) {
	if v, set := os.LookupEnv("GOMAXPROCS"); set {
		t.Skipf("GOMAXPROCS=%s is set in the environment: the package leaves it alone, nothing to check", v)
	}
	assert.Equal(t, 1, runtime.GOMAXPROCS(0))
}
