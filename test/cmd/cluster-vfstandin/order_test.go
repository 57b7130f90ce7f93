package main

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestListeningUnixPath_FindsOnlyAListenerOfThatName(t *testing.T) {
	const text = `Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 31112 /var/run/kubevirt-hooks/sriov-udn-binding.sock
0000000000000000: 00000003 00000000 00000000 0001 03 31113 /var/run/kubevirt-hooks/other.sock
0000000000000000: 00000002 00000000 00010000 0001 01 31114 @abstract
0000000000000000: 00000002 00000000 00000000 0002 01 31115
`
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"sriov-udn-binding.sock", true},
		{"udn-binding.sock", false}, // a base name, not a suffix
		{"other.sock", false},       // connected, not listening
		{"missing.sock", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := listeningUnixPath(strings.NewReader(text), tc.name)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// The kernel's own list: a socket this test listens on is found, and the wait ends; a name nobody listens on
// times out with an error naming it.
func TestAwaitListener_RealProcNetUnix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ours-under-test.sock")
	ctx := context.Background()
	err := awaitListener(ctx, procNetUnix, filepath.Base(path), 200*time.Millisecond, 10*time.Millisecond)
	require.ErrorContains(t, err, "ours-under-test.sock")
	l, err := net.Listen("unix", path)
	require.NoError(t, err)
	defer l.Close()
	require.NoError(t, awaitListener(ctx, procNetUnix, filepath.Base(path), 5*time.Second, 10*time.Millisecond))
}
