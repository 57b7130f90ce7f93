package domain

import (
	"context"
	"errors"
	"fmt"
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

func TestDocument_AnswersAndAppliesLikeThePackageFunctions(t *testing.T) {
	ifaces := []model.BoundInterface{udnIface()}
	doc, err := Parse(context.Background(), []byte(kubevirtDomain))
	require.NoError(t, err)
	wired, err := doc.WiredByKubeVirt("udn")
	require.NoError(t, err)
	wantWired, err := WiredByKubeVirt([]byte(kubevirtDomain), "udn")
	require.NoError(t, err)
	assert.Equal(t, wantWired, wired)
	_, err = doc.WiredByKubeVirt("../x")
	assert.Error(t, err)
	got, err := doc.Apply(ifaces)
	require.NoError(t, err)
	want, err := Apply([]byte(kubevirtDomain), ifaces)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
}
