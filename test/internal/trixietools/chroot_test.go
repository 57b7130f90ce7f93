package trixietools

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMountScript_ProcSysDevThenEachMountInOrder(t *testing.T) {
	got := mountScript("/c/root", []Mount{{Target: "mnt"}, {Source: "/host/it's", Target: "mnt/in"}})
	assert.Equal(t, strings.Join([]string{
		"mount -t proc proc '/c/root/proc'",
		"mount --rbind /sys '/c/root/sys'",
		"mount --rbind /dev '/c/root/dev'",
		"[ -e '/c/root/mnt' ] || mkdir -p '/c/root/mnt'",
		"mount -t tmpfs tmpfs '/c/root/mnt'",
		"[ -e '/c/root/mnt/in' ] || mkdir -p '/c/root/mnt/in'",
		`mount --bind '/host/it'\''s' '/c/root/mnt/in'`,
	}, "\n")+"\n", got)
}

func TestCommandInNetns_EntersTheNamespaceThenItsOwnMountNamespace(t *testing.T) {
	cmd, err := Root{Dir: "/c/root"}.CommandInNetns(context.Background(), "peer", nil, "qemu-system-x86_64", "-version")
	if err != nil {
		t.Skipf("skipping: %v", err) // nsenter, unshare or chroot missing on this machine
	}
	require.GreaterOrEqual(t, len(cmd.Args), 6)
	assert.Equal(t, []string{"--net=/run/netns/peer", "--"}, cmd.Args[1:3])
	assert.Contains(t, cmd.Args[3], "unshare")
	assert.Equal(t, []string{"qemu-system-x86_64", "-version"}, cmd.Args[len(cmd.Args)-2:])
	assert.Contains(t, strings.Join(cmd.Args, " "), "chroot' '/c/root' \"$@\"")
}
