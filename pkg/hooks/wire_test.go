package hooks

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/runtime/protoiface"
	"kubevirt.io/kubevirt/pkg/hooks/info"
	hooksv1alpha2 "kubevirt.io/kubevirt/pkg/hooks/v1alpha2"
	hooksv1alpha3 "kubevirt.io/kubevirt/pkg/hooks/v1alpha3"
)

// marshal is what virt-launcher's gRPC client sends for m: KubeVirt's generated message, marshalled by
// the protobuf runtime it links.
func marshal(t testing.TB, m protoiface.MessageV1) []byte {
	t.Helper()
	b, err := proto.Marshal(protoadapt.MessageV2Of(m))
	require.NoError(t, err)
	return b
}

// unmarshal decodes what the sidecar answers into KubeVirt's generated message, as virt-launcher does.
func unmarshal(t testing.TB, b []byte, m protoiface.MessageV1) {
	t.Helper()
	require.NoError(t, proto.Unmarshal(b, protoadapt.MessageV2Of(m)))
}

// kubevirtJSON is what virt-launcher's json.Marshal sends for v.
func kubevirtJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func TestDecodeCloudInitRequest_DecodesWhatKubeVirtSends_CompactsCloudInitData_SkipsTheEcho(t *testing.T) {
	user := "#!/bin/sh\ncat <<'EOF'\n<p>&amp;</p> \u2028 größe \x01\t\"q\" \\ \nEOF\n" + strings.Repeat("<>&", 5000)
	data := kubevirtJSON(t, map[string]any{"DataSource": "noCloud", "UserData": user, "NetworkData": "version: 2 # <&>", "VolumeName": "ci"})
	echo := kubevirtJSON(t, map[string]string{"userData": user})
	vmi := []byte(`{"metadata":{"name":"a<b"}}`)
	for name, raw := range map[string][]byte{
		"v1alpha3": marshal(t, &hooksv1alpha3.PreCloudInitIsoParams{CloudInitData: data, CloudInitNoCloudSource: echo, Vmi: vmi}),
		"v1alpha2": marshal(t, &hooksv1alpha2.PreCloudInitIsoParams{CloudInitData: data, CloudInitNoCloudSource: echo, Vmi: vmi}),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := decodeCloudInitRequest(raw)
			require.NoError(t, err)
			assert.Equal(t, vmi, got.vmi)
			assert.Less(t, len(got.cloudInitData), len(data)/3, "'<', '>', '&' travel as themselves")
			assert.Equal(t, len(got.cloudInitData), cap(got.cloudInitData), "a slice of its own size")
			var want, have map[string]any
			require.NoError(t, json.Unmarshal(data, &want))
			require.NoError(t, json.Unmarshal(got.cloudInitData, &have), "%s", got.cloudInitData[:200])
			assert.Equal(t, want, have, "the same JSON value")
		})
	}
}

func TestDecodeDomainRequest_DecodesWhatKubeVirtSends(t *testing.T) {
	vmi := []byte(`{"metadata":{"name":"a"}}`)
	for name, raw := range map[string][]byte{
		"v1alpha3": marshal(t, &hooksv1alpha3.OnDefineDomainParams{DomainXML: []byte("<domain/>"), Vmi: vmi}),
		"v1alpha2": marshal(t, &hooksv1alpha2.OnDefineDomainParams{DomainXML: []byte("<domain/>"), Vmi: vmi}),
		// An unknown field of every wire type is skipped, and so is a known one with another wire type.
		"unknown fields": append(marshal(t, &hooksv1alpha3.OnDefineDomainParams{DomainXML: []byte("<domain/>"), Vmi: vmi}),
			0x48, 0x96, 0x01, 0x55, 1, 2, 3, 4, 0x59, 1, 2, 3, 4, 5, 6, 7, 8, 0x62, 2, 'h', 'i', 0x10, 0x01),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := decodeDomainRequest(raw)
			require.NoError(t, err)
			assert.Equal(t, "<domain/>", string(got.domainXML))
			assert.Equal(t, vmi, got.vmi)
		})
	}
}

func TestEncodedAnswers_DecodeAsKubeVirtsMessages(t *testing.T) {
	var infoRes info.InfoResult
	unmarshal(t, encodeInfoResult("sriov-udn-binding", HookPoints(), Versions()), &infoRes)
	assert.Equal(t, "sriov-udn-binding", infoRes.GetName())
	assert.Equal(t, []string{hooksv1alpha3.Version, hooksv1alpha2.Version}, infoRes.GetVersions())
	var points []string
	for _, p := range infoRes.GetHookPoints() {
		points = append(points, p.GetName())
		assert.Zero(t, p.GetPriority())
	}
	assert.Equal(t, []string{info.OnDefineDomainHookPointName, info.PreCloudInitIsoHookPointName, info.ShutdownHookPointName}, points)

	var dom hooksv1alpha3.OnDefineDomainResult
	unmarshal(t, encodeBytesMessage(bytesField{fieldDomainXML, []byte("<domain/>")}), &dom)
	assert.Equal(t, "<domain/>", string(dom.GetDomainXML()))

	var ci hooksv1alpha3.PreCloudInitIsoResult
	unmarshal(t, encodeBytesMessage(bytesField{fieldNoCloudSource, []byte("src")}, bytesField{fieldCloudInitData, []byte("data")}), &ci)
	assert.Equal(t, "src", string(ci.GetCloudInitNoCloudSource()))
	assert.Equal(t, "data", string(ci.GetCloudInitData()))

	assert.Empty(t, encodeBytesMessage(bytesField{fieldDomainXML, nil}), "proto3 leaves an empty field out")
}

func TestDecodeMutateRequest(t *testing.T) {
	ctxMsg := protowire.AppendBytes(protowire.AppendTag(nil, fieldInvocationContext, protowire.BytesType), []byte("Boot"))
	var raw []byte
	for _, f := range []bytesField{{fieldMutateType, []byte("libvirt")}, {fieldMutateDomain, []byte("<domain/>")}, {fieldMutateVMI, []byte("{}")}, {fieldMutateContext, ctxMsg}} {
		raw = appendBytesField(raw, f.num, f.value)
	}
	got, err := decodeMutateRequest(raw)
	require.NoError(t, err)
	assert.Equal(t, mutateRequest{domainType: "libvirt", invocationContext: "Boot", domain: []byte("<domain/>"), vmi: []byte("{}")}, got)

	_, err = decodeMutateRequest(appendBytesField(nil, fieldMutateContext, []byte{0x0a, 0x09, 'B'}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "MutateDomainRequest.sidecar_context")
}

func TestDecodeRequests_BadMessages_ErrorsNamingTheMessageAndField(t *testing.T) {
	raw := marshal(t, &hooksv1alpha3.PreCloudInitIsoParams{CloudInitData: []byte(`{"UserData":"x"}`), Vmi: []byte("{}")})
	for name, in := range map[string][]byte{
		"truncated":           raw[:len(raw)-3],
		"length past the end": {0x1a, 0xff, 0x01, 'x'},
		"group wire type":     {0x1b},
		"field number 0":      {0x02, 0x00},
		"bad varint":          {0x08, 0xff},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeCloudInitRequest(in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "PreCloudInitIsoParams")
			_, err = decodeDomainRequest(in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "OnDefineDomainParams")
		})
	}
}

// The request decoders never panic, whatever bytes arrive; what decodes is what the protobuf runtime
// decodes from the same bytes into KubeVirt's message.
func FuzzDecodeRequests(f *testing.F) {
	f.Add(marshal(f, &hooksv1alpha3.PreCloudInitIsoParams{CloudInitData: []byte(`{"UserData":"\u003c"}`), Vmi: []byte("{}"), CloudInitNoCloudSource: []byte("e")}))
	f.Add(marshal(f, &hooksv1alpha3.OnDefineDomainParams{DomainXML: []byte("<domain/>"), Vmi: []byte("{}")}))
	f.Add([]byte{0x1a, 0xff, 0x01, 'x'})
	f.Add([]byte{0x22, 0x03, 0x0a, 0x01, 'B'})
	f.Fuzz(func(t *testing.T, in []byte) {
		_, _ = decodeMutateRequest(in)
		got, err := decodeDomainRequest(in)
		var ref hooksv1alpha3.OnDefineDomainParams
		refErr := proto.Unmarshal(in, protoadapt.MessageV2Of(&ref))
		if refErr != nil {
			return // the runtime is stricter on some inputs (groups, field numbers past its range)
		}
		require.NoError(t, err)
		assert.Equal(t, string(ref.GetDomainXML()), string(got.domainXML))
		assert.Equal(t, string(ref.GetVmi()), string(got.vmi))
		if _, err := decodeCloudInitRequest(in); err != nil {
			assert.Contains(t, err.Error(), "PreCloudInitIsoParams")
		}
	})
}

// compactEscapes keeps the JSON value: whatever string virt-launcher marshals decodes to the same
// string after it, never longer; any JSON stays valid, and its value the same.
func FuzzCompactEscapes(f *testing.F) {
	for _, s := range []string{"", "<>&", "\u2028\u2029\ufffd", "\x00\x1f\"\\/", "a\\u003cb", "\xff\xfe", `"\u003c"`, `{"a":"\u003c\n\u0041\ud83d\ude00"}`, `"\u12`, `"\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		compact := func(in []byte) []byte {
			n, err := compactEscapes(bytes.NewReader(in), uint64(len(in)), nil)
			require.NoError(t, err)
			out := make([]byte, n)
			m, err := compactEscapes(bytes.NewReader(in), uint64(len(in)), out)
			require.NoError(t, err)
			require.Equal(t, n, m, "both passes agree")
			require.LessOrEqual(t, len(out), len(in))
			return out
		}
		enc, err := json.Marshal(s)
		require.NoError(t, err)
		var want string
		require.NoError(t, json.Unmarshal(enc, &want))
		// Alone, and after padding that puts a chunk boundary (compactChunk) somewhere inside it.
		for _, pad := range []int{0, compactChunk - 1 - len(s)%7, compactChunk - 5} {
			var back string
			require.NoError(t, json.Unmarshal(compact(append([]byte(strings.Repeat(" ", pad)), enc...)), &back))
			require.Equal(t, want, back, "pad %d", pad)
		}

		if json.Valid([]byte(s)) {
			out := compact([]byte(s))
			require.True(t, json.Valid(out), "%q -> %q", s, out)
			var a, b any
			require.NoError(t, json.Unmarshal([]byte(s), &a))
			require.NoError(t, json.Unmarshal(out, &b))
			require.Equal(t, a, b)
		}
	})
}
