package libvirtcheck

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// capabilities is the shape of `virsh capabilities` (libvirt 11.3, trixie), cut to the guests; arches
// lists each x86 guest's domain types.
func capabilities(i686, x8664 string) string {
	return `<capabilities><host><uuid>x</uuid></host>
<guest><os_type>hvm</os_type><arch name='i686'><wordsize>32</wordsize>` + i686 + `</arch></guest>
<guest><os_type>hvm</os_type><arch name='x86_64'><wordsize>64</wordsize><emulator>/usr/bin/qemu-system-x86_64</emulator>
<machine maxCpus='255'>pc-q35-10.0</machine>` + x8664 + `</arch></guest></capabilities>`
}

func TestVirtTypeOf_KVMOnlyWhereListedForX8664(t *testing.T) {
	tests := []struct {
		name, caps, want, err string
	}{
		{name: "usable /dev/kvm", caps: capabilities(`<domain type='qemu'/><domain type='kvm'/>`, `<domain type='qemu'/><domain type='kvm'/>`), want: "kvm"},
		{name: "no /dev/kvm", caps: capabilities(`<domain type='qemu'/>`, `<domain type='qemu'/>`), want: "qemu"},
		{name: "kvm for i686 only does not count", caps: capabilities(`<domain type='kvm'/>`, `<domain type='qemu'/>`), want: "qemu"},
		{name: "no x86_64 guest", caps: `<capabilities><host/></capabilities>`, err: "no x86_64 guest"},
		{name: "not XML", caps: `virsh: error`, err: "virsh capabilities"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := virtTypeOf([]byte(tc.caps))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
