package binding

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/domain"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// paddedDomain is a KubeVirt-shaped domain of about size bytes: many small elements, the shape that
// costs an XML tokenizer the most per byte.
func paddedDomain(size int) []byte {
	var b bytes.Buffer
	b.WriteString("<domain type=\"kvm\">\n\t<name>default_vm</name>\n\t<metadata>\n")
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "\t\t<pad n=\"%d\"><v>x</v></pad>\n", i)
	}
	b.WriteString("\t</metadata>\n\t<devices>\n\t\t<interface type=\"ethernet\"><alias name=\"ua-default\"></alias></interface>\n\t</devices>\n</domain>\n")
	return b.Bytes()
}

// allocated returns the bytes allocated while f runs (an upper bound on the heap f can add).
func allocated(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// One parse of the domain per call, not one per bound interface (the sample VMI has
// two bound interfaces, so a parse per interface allocates about three times what one Apply does).
func TestOnDefineDomain_ParsesTheDomainOnce_NotOncePerBoundInterface(t *testing.T) {
	annotations, vmi := loadSample(t)
	b := newTestBinding(t, annotations, nil)
	dom := paddedDomain(1 << 20)
	vmiModel, err := model.DecodeVMI(vmi)
	require.NoError(t, err)
	ifaces, err := model.Build(vmiModel, b.cfg.Snapshots.Snapshot(), b.cfg.Options)
	require.NoError(t, err)
	require.Len(t, ifaces, 2, "precondition: two bound interfaces")

	onePass := allocated(func() {
		_, err := domain.Apply(dom, ifaces)
		require.NoError(t, err)
	})
	hook := allocated(func() {
		_, err := b.OnDefineDomain(context.Background(), vmi, dom)
		require.NoError(t, err)
	})
	t.Logf("domain %d KiB: one Apply allocates %d KiB, OnDefineDomain %d KiB", len(dom)>>10, onePass>>10, hook>>10)
	assert.LessOrEqual(t, hook, onePass+onePass/2, "OnDefineDomain allocates more than one parse of the domain")
}

// A call whose client has gone does no work and says so.
func TestOnDefineDomain_ContextEnded_ReturnsItsErrorAndNoDomain(t *testing.T) {
	annotations, vmi := loadSample(t)
	b := newTestBinding(t, annotations, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out, err := b.OnDefineDomain(ctx, vmi, paddedDomain(64<<10))
	require.Error(t, err)
	assert.Nil(t, out)
	assert.Equal(t, codes.Canceled, status.Code(err), "%v", err)
}

// PreCloudInitIso after its deadline returns the deadline, not a result nobody reads.
func TestPreCloudInitIso_ContextEnded_ReturnsItsError(t *testing.T) {
	annotations, vmi := loadSample(t)
	b := newTestBinding(t, annotations, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	data, err := b.PreCloudInitIso(ctx, vmi, []byte(noCloudInput))
	require.Error(t, err)
	assert.Nil(t, data)
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
}
