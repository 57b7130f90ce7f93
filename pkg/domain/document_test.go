package domain

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

func TestParse_ContextEndedDuringALargeDomain_StopsWithItsError(t *testing.T) {
	var b strings.Builder
	b.WriteString("<domain><metadata>")
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "<pad n=\"%d\"/>", i)
	}
	b.WriteString("</metadata><devices/></domain>")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Parse(ctx, []byte(b.String()))
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
	assert.Contains(t, err.Error(), "parsing the domain XML stopped at byte")
}

func TestDocument_AnswersAndAppliesLikeThePackageFunction(t *testing.T) {
	ifaces := []model.BoundInterface{udnIface()}
	doc, err := Parse(context.Background(), []byte(kubevirtDomain))
	require.NoError(t, err)
	wired, err := doc.WiredByKubeVirt("default")
	require.NoError(t, err)
	assert.True(t, wired)
	_, err = doc.WiredByKubeVirt("../x")
	assert.Error(t, err)
	got, err := doc.Apply(ifaces)
	require.NoError(t, err)
	want, err := Apply([]byte(kubevirtDomain), ifaces)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
}

// encoding/xml keeps a stack entry per open element: 2.8 MB of <a> nested 400,000 deep held 75 MiB.
// libvirt's domain XML is about 8 levels deep; past MaxDepth the domain is refused, cheaply.
func TestParse_NestingPastTheLimit_RejectedBeforeItCostsMemory(t *testing.T) {
	n := 400000
	src := []byte("<domain>" + strings.Repeat("<a>", n) + strings.Repeat("</a>", n) + "<devices/></domain>")
	var err error
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = Parse(context.Background(), src)
	runtime.ReadMemStats(&after)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrMalformedDomain)
	assert.Contains(t, err.Error(), fmt.Sprintf("nesting depth exceeds %d", MaxDepth))
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20))

	ok := "<domain>" + strings.Repeat("<a>", MaxDepth-2) + strings.Repeat("</a>", MaxDepth-2) + "<devices/></domain>"
	_, err = Parse(context.Background(), []byte(ok))
	assert.NoError(t, err)
}
