package model

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestIsOrdinalIfaceName_MatchesOnlyNetFollowedByDigits(t *testing.T) {
	for name, want := range map[string]bool{
		"net1": true, "net0": true, "net123": true,
		"net": false, "net1a": false, "anet1": false, "net-1": false, "eth0": false, "": false, "net１": false,
		"pod16367aacb67": false,
	} {
		assert.Equal(t, want, isOrdinalIfaceName(name), name)
	}
}
