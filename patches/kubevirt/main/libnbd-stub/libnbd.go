// Package libnbd stands in for libguestfs.org/libnbd (the Go bindings of the NBD client library), which the Go
// module proxy of this project's machines refuses. KubeVirt's virt-launcher imports it in one place,
// pkg/storage/nbdclient (the NBD client of backup and export), so that `go build ./cmd/virt-launcher` of a
// patched KubeVirt main tree needs it to compile, nothing more: patches/kubevirt/test-main.sh swaps it in with a
// directory replace in a throwaway go.mod. It declares what nbdclient uses; every call fails, so a
// virt-launcher built with it has no NBD client (backup and export fail naming this stub) and nothing else
// changes. Never shipped, never in a committed go.mod.
package libnbd

import "errors"

// Meta contexts and extent flags, with the values of the NBD protocol (doc/proto.md "base:allocation",
// "qemu:dirty-bitmap:<name>").
const (
	CONTEXT_BASE_ALLOCATION   = "base:allocation"
	CONTEXT_QEMU_DIRTY_BITMAP = "qemu:dirty-bitmap:"

	STATE_HOLE  = uint32(1 << 0)
	STATE_ZERO  = uint32(1 << 1)
	STATE_DIRTY = uint32(1 << 0)
)

// errStub is what every call returns.
var errStub = errors.New("libnbd is a build stub here (patches/kubevirt/main/libnbd-stub): no NBD client")

// LibnbdExtent is one extent of a block status reply.
type LibnbdExtent struct {
	Length uint64
	Flags  uint64
}

// ExtentCallback64 receives the extents of one meta context.
type ExtentCallback64 func(metacontext string, offset uint64, entries []LibnbdExtent, err *int) int

// BlockStatus64Optargs and PreadOptargs are the optional arguments of those calls (none used).
type (
	BlockStatus64Optargs struct{}
	PreadOptargs         struct{}
)

// Libnbd is a handle. Create never returns one.
type Libnbd struct{}

// Create fails: there is no NBD client behind this package.
func Create() (*Libnbd, error) { return nil, errStub }

func (*Libnbd) Close()                                    {}
func (*Libnbd) AddMetaContext(string) error               { return errStub }
func (*Libnbd) CanMetaContext(string) (bool, error)       { return false, errStub }
func (*Libnbd) SetExportName(string) error                { return errStub }
func (*Libnbd) ConnectUnix(string) error                  { return errStub }
func (*Libnbd) GetSize() (uint64, error)                  { return 0, errStub }
func (*Libnbd) Pread([]byte, uint64, *PreadOptargs) error { return errStub }
func (*Libnbd) BlockStatus64(uint64, uint64, ExtentCallback64, *BlockStatus64Optargs) error {
	return errStub
}
