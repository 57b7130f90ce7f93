package hooks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"kubevirt.io/kubevirt/pkg/hooks/info"
	hooksv1alpha2 "kubevirt.io/kubevirt/pkg/hooks/v1alpha2"
	hooksv1alpha3 "kubevirt.io/kubevirt/pkg/hooks/v1alpha3"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/hooks/pluginv1alpha1"
)

// frames splits b into 16 KiB buffers, as gRPC's transport hands a message to the codec.
func frames(b []byte) mem.BufferSlice {
	var out mem.BufferSlice
	for len(b) > 0 {
		n := min(len(b), 16<<10)
		out = append(out, mem.SliceBuffer(b[:n]))
		b = b[n:]
	}
	return out
}

func marshal(t *testing.T, m protoadapt.MessageV1) []byte {
	t.Helper()
	b, err := proto.Marshal(protoadapt.MessageV2Of(m))
	require.NoError(t, err)
	return b
}

func TestRequestCodec_CloudInitRequest_DecodedWithoutTheLegacyCopy(t *testing.T) {
	c := newRequestCodec(DefaultLimits())
	want := &hooksv1alpha3.PreCloudInitIsoParams{Vmi: []byte(`{"kind":"VirtualMachineInstance"}`),
		CloudInitData: make([]byte, 100<<10), CloudInitNoCloudSource: []byte(`{"userData":"x"}`)}
	for name, got := range map[string]interface {
		GetVmi() []byte
		GetCloudInitData() []byte
		GetCloudInitNoCloudSource() []byte
	}{"v1alpha3": &hooksv1alpha3.PreCloudInitIsoParams{}, "v1alpha2": &hooksv1alpha2.PreCloudInitIsoParams{}} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, c.Unmarshal(frames(marshal(t, want)), got))
			assert.Equal(t, want.Vmi, got.GetVmi())
			assert.Equal(t, want.CloudInitData, got.GetCloudInitData())
			assert.Empty(t, got.GetCloudInitNoCloudSource(), "the legacy copy is skipped")
		})
	}
}

func TestRequestCodec_OtherMessages_DecodedWhole(t *testing.T) {
	c := newRequestCodec(DefaultLimits())
	want := &hooksv1alpha3.OnDefineDomainParams{DomainXML: []byte("<domain/>"), Vmi: []byte("{}")}
	var got hooksv1alpha3.OnDefineDomainParams
	require.NoError(t, c.Unmarshal(frames(marshal(t, want)), &got))
	assert.Equal(t, want.DomainXML, got.DomainXML)
	assert.Equal(t, want.Vmi, got.Vmi)
}

func TestRequestCodec_PastTheLimit_RefusedNamingMessageFieldsSizeAndLimit(t *testing.T) {
	l := DefaultLimits()
	l.CloudInitDecodeBytes, l.DecodeBytes = 1000, 500
	c := newRequestCodec(l)
	for _, tc := range []struct {
		msg   any
		size  int
		wants []string
	}{
		{&hooksv1alpha3.PreCloudInitIsoParams{}, 1001, []string{"kubevirt.hooks.v1alpha3.PreCloudInitIsoParams (fields cloudInitNoCloudSource, vmi, cloudInitData) is 1001 bytes, over the 1000", "user data and networkData"}},
		{&hooksv1alpha2.PreCloudInitIsoParams{}, 1001, []string{"kubevirt.hooks.v1alpha2.PreCloudInitIsoParams", "over the 1000"}},
		{&hooksv1alpha3.OnDefineDomainParams{}, 501, []string{"kubevirt.hooks.v1alpha3.OnDefineDomainParams (fields domainXML, vmi) is 501 bytes, over the 500"}},
		{&pluginv1alpha1.MutateDomainRequest{}, 501, []string{"kubevirt.hooks.plugins.v1alpha1.MutateDomainRequest (fields domain_type, domain, vmi, sidecar_context)", "over the 500"}},
		{&info.InfoParams{}, 501, []string{"kubevirt.hooks.info.InfoParams (fields ) is 501 bytes"}},
	} {
		err := c.Unmarshal(frames(make([]byte, tc.size)), tc.msg)
		require.Error(t, err)
		for _, w := range tc.wants {
			assert.Contains(t, err.Error(), w)
		}
	}
	assert.NoError(t, c.Unmarshal(frames(make([]byte, 0)), &hooksv1alpha3.OnDefineDomainParams{}), "at the limit or under: decoded")
}

// The request decoders never panic, whatever bytes a peer sends as a message (gRPC's length prefix is
// checked before; what is inside is the peer's).
func FuzzRequestCodec(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x03, 'a', 'b', 'c', 0x12, 0x02, '{', '}', 0x1a, 0x00})
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})       // a length past the end
	f.Add([]byte{0x08, 0x96, 0x01, 0x15, 1, 2, 3, 4, 0x1a}) // other wire types, cut off
	f.Add([]byte{0x22, 0x02, 0x0a, 0x00, 0x12, 0x01, 'x'})  // a sub-message (MutateDomainRequest.sidecar_context)
	c := newRequestCodec(DefaultLimits())
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range []any{&hooksv1alpha3.PreCloudInitIsoParams{}, &hooksv1alpha2.PreCloudInitIsoParams{},
			&hooksv1alpha3.OnDefineDomainParams{}, &hooksv1alpha2.OnDefineDomainParams{}, &pluginv1alpha1.MutateDomainRequest{},
			&info.InfoParams{}, &hooksv1alpha3.ShutdownParams{}} {
			_ = c.Unmarshal(frames(b), m)
		}
	})
}
