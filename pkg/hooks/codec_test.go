package hooks

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/mem"
	hooksv1alpha2 "kubevirt.io/kubevirt/pkg/hooks/v1alpha2"
	hooksv1alpha3 "kubevirt.io/kubevirt/pkg/hooks/v1alpha3"
)

// received splits b into chunks of size, as gRPC hands a message over in the buffers it received.
func received(b []byte, size int) mem.BufferSlice {
	var s mem.BufferSlice
	for len(b) > size {
		s = append(s, mem.SliceBuffer(b[:size]))
		b = b[size:]
	}
	return append(s, mem.SliceBuffer(b))
}

// marshal is what virt-launcher's gRPC client sends for v: gRPC's proto codec.
func marshal(c requestCodec, v any) ([]byte, error) {
	b, err := c.Marshal(v)
	if err != nil {
		return nil, err
	}
	return b.Materialize(), nil
}

// kubevirtJSON is what virt-launcher's json.Marshal sends for v.
func kubevirtJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func TestRequestCodec_DecodesWhatProtoDecodes_CompactsCloudInitData_SkipsTheEcho(t *testing.T) {
	user := "#!/bin/sh\ncat <<'EOF'\n<p>&amp;</p> \u2028 größe \x01\t\"q\" \\ \nEOF\n" + strings.Repeat("<>&", 5000)
	data := kubevirtJSON(t, map[string]any{"DataSource": "noCloud", "UserData": user, "NetworkData": "version: 2 # <&>", "VolumeName": "ci"})
	echo := kubevirtJSON(t, map[string]string{"userData": user})
	vmi := []byte(`{"metadata":{"name":"a<b"}}`)
	codec := newRequestCodec()
	for _, chunk := range []int{1, 7, 16 << 10, 1 << 30} {
		raw, err := marshal(codec, &hooksv1alpha3.PreCloudInitIsoParams{CloudInitData: data, CloudInitNoCloudSource: echo, Vmi: vmi})
		require.NoError(t, err)
		var got hooksv1alpha3.PreCloudInitIsoParams
		require.NoError(t, codec.Unmarshal(received(raw, chunk), &got))
		assert.Equal(t, vmi, got.Vmi)
		assert.Empty(t, got.CloudInitNoCloudSource, "the echo is skipped")
		assert.Less(t, len(got.CloudInitData), len(data)/3, "'<', '>', '&' travel as themselves")
		var want, have map[string]any
		require.NoError(t, json.Unmarshal(data, &want))
		require.NoError(t, json.Unmarshal(got.CloudInitData, &have), "%s", got.CloudInitData[:200])
		assert.Equal(t, want, have, "the same JSON value")

		raw, err = marshal(codec, &hooksv1alpha2.OnDefineDomainParams{DomainXML: []byte("<domain/>"), Vmi: vmi})
		require.NoError(t, err)
		var dom hooksv1alpha2.OnDefineDomainParams
		require.NoError(t, codec.Unmarshal(received(raw, chunk), &dom))
		assert.Equal(t, "<domain/>", string(dom.DomainXML))
		assert.Equal(t, vmi, dom.Vmi)
	}
}

func TestRequestCodec_BadMessages_ErrorsNamingTheField(t *testing.T) {
	codec := newRequestCodec()
	raw, err := marshal(codec, &hooksv1alpha3.PreCloudInitIsoParams{CloudInitData: []byte(`{"UserData":"x"}`), Vmi: []byte("{}")})
	require.NoError(t, err)
	for name, in := range map[string][]byte{
		"truncated":           raw[:len(raw)-3],
		"length past the end": {0x1a, 0xff, 0x01, 'x'},
		"group wire type":     {0x1b},
		"field number 0":      {0x02, 0x00},
		"bad varint":          {0x08, 0xff},
	} {
		t.Run(name, func(t *testing.T) {
			var p hooksv1alpha3.PreCloudInitIsoParams
			err := codec.Unmarshal(received(in, 2), &p)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "hook request")
		})
	}
}

// compactEscapes keeps the JSON value: whatever string virt-launcher marshals decodes to the same
// string after it, never longer; any JSON stays valid, and its value the same.
func FuzzCompactEscapes(f *testing.F) {
	for _, s := range []string{"", "<>&", "\u2028\u2029\ufffd", "\x00\x1f\"\\/", "a\\u003cb", "\xff\xfe", `"\u003c"`, `{"a":"\u003c\n\u0041\ud83d\ude00"}`, `"\u12`, `"\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		compact := func(in []byte) []byte {
			r := mem.BufferSlice{mem.SliceBuffer(in)}.Reader()
			n, err := compactEscapes(r, uint64(len(in)), nil)
			require.NoError(t, err)
			out := make([]byte, n)
			r = mem.BufferSlice{mem.SliceBuffer(in)}.Reader()
			m, err := compactEscapes(r, uint64(len(in)), out)
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
