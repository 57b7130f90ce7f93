package hooks

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	protobuf "google.golang.org/protobuf/proto"
	hooksv1alpha2 "kubevirt.io/kubevirt/pkg/hooks/v1alpha2"
	hooksv1alpha3 "kubevirt.io/kubevirt/pkg/hooks/v1alpha3"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/hooks/requestpb"
)

// requestCodec is gRPC's own proto codec, with two changes for the requests that can be large:
//   - a request larger than the decode limit is refused before protobuf copies it (DecodeBytes says why the
//     copies matter), with an error that names the message, its fields, its size and the limit. gRPC sends it
//     to virt-launcher inside "grpc: error unmarshalling request: ..." (server.go processUnaryRPC);
//     virt-launcher logs it and the VM start fails;
//   - PreCloudInitIsoParams is decoded without its legacy cloudInitNoCloudSource copy (requestpb): the answer
//     carries CloudInitData alone (callbacks.go), and the skipped field is half of what a large user data
//     costs (docs/footprint.md "Figures behind the code").
type requestCodec struct {
	proto                 encoding.CodecV2
	cloudInitLimit, limit int
}

func newRequestCodec(l Limits) requestCodec {
	return requestCodec{proto: encoding.GetCodecV2(proto.Name), cloudInitLimit: l.CloudInitDecodeBytes, limit: l.DecodeBytes}
}

func (c requestCodec) Name() string { return proto.Name }

func (c requestCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	n := data.Len()
	switch m := v.(type) {
	case *hooksv1alpha3.PreCloudInitIsoParams:
		if n > c.cloudInitLimit {
			return requestTooLarge(v, n, c.cloudInitLimit)
		}
		return decodeCloudInitRequest(data, &m.Vmi, &m.CloudInitData)
	case *hooksv1alpha2.PreCloudInitIsoParams:
		if n > c.cloudInitLimit {
			return requestTooLarge(v, n, c.cloudInitLimit)
		}
		return decodeCloudInitRequest(data, &m.Vmi, &m.CloudInitData)
	}
	if n > c.limit {
		return requestTooLarge(v, n, c.limit)
	}
	return c.proto.Unmarshal(data, v)
}

// decodeCloudInitRequest decodes a PreCloudInitIsoParams message into vmi and cloudInitData, skipping its
// other fields (cloudInitNoCloudSource) without copying them.
func decodeCloudInitRequest(data mem.BufferSlice, vmi, cloudInitData *[]byte) error {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	var req requestpb.CloudInitIsoRequest
	if err := (protobuf.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(buf.ReadOnlyData(), &req); err != nil {
		return fmt.Errorf("PreCloudInitIsoParams: %w", err)
	}
	*vmi, *cloudInitData = req.GetVmi(), req.GetCloudInitData()
	return nil
}

// requestTooLarge names what was too large: the message and its fields, and, for the cloud-init request,
// where its size comes from.
func requestTooLarge(v any, size, limit int) error {
	name, fields := describe(v)
	msg := fmt.Sprintf("%s (fields %s) is %d bytes, over the %d bytes the sidecar decodes", name, strings.Join(fields, ", "), size, limit)
	if strings.HasSuffix(name, ".PreCloudInitIsoParams") {
		msg += ": its size is the cloud-init user data and networkData of the VMI, which virt-launcher sends twice " +
			"(cloudInitData and cloudInitNoCloudSource), JSON-escaped ('<', '>', '&' and control bytes take 6 bytes each); " +
			"make them smaller"
	}
	return errors.New(msg)
}

// describe returns the protobuf full name of v's message type and its field names.
func describe(v any) (string, []string) {
	m := protoMessage(v)
	if m == nil {
		return fmt.Sprintf("%T", v), nil
	}
	d := m.ProtoReflect().Descriptor()
	fields := make([]string, 0, d.Fields().Len())
	for i := range d.Fields().Len() {
		fields = append(fields, string(d.Fields().Get(i).Name()))
	}
	return string(d.FullName()), fields
}
