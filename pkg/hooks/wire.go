package hooks

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// The methods served, as virt-launcher's clients name them on the wire: KubeVirt's hook protos
// (kubevirt.io/kubevirt pkg/hooks/info/api_info.proto, v1alpha2/api_v1alpha2.proto,
// v1alpha3/api_v1alpha3.proto) and, from v1.9.0, the Plugin API's domain hook
// (pkg/hooks/plugins/v1alpha1/api.proto).
const (
	methodInfo              = "/kubevirt.hooks.info.Info/Info"
	methodV3OnDefineDomain  = "/kubevirt.hooks.v1alpha3.Callbacks/OnDefineDomain"
	methodV3PreCloudInitIso = "/kubevirt.hooks.v1alpha3.Callbacks/PreCloudInitIso"
	methodV3Shutdown        = "/kubevirt.hooks.v1alpha3.Callbacks/Shutdown"
	methodV2OnDefineDomain  = "/kubevirt.hooks.v1alpha2.Callbacks/OnDefineDomain"
	methodV2PreCloudInitIso = "/kubevirt.hooks.v1alpha2.Callbacks/PreCloudInitIso"
	methodMutateDomain      = "/kubevirt.hooks.plugins.v1alpha1.DomainHookService/MutateDomain"
)

// The versions and hook points Info reports (pkg/hooks/v1alpha{2,3} Version, pkg/hooks/info
// *HookPointName).
const (
	versionV1alpha3 = "v1alpha3"
	versionV1alpha2 = "v1alpha2"

	hookPointOnDefineDomain  = "OnDefineDomain"
	hookPointPreCloudInitIso = "PreCloudInitIso"
	hookPointShutdown        = "Shutdown"
)

// Invocation contexts virt-launcher v1.9.0 sends in MutateDomainRequest.sidecar_context
// (kubevirt.io/api plugin/v1alpha1 types.go InvocationContext), and the one domain type it sends
// (virtwrap/plugins/sidecar.go).
const (
	InvocationContextBoot            = "Boot"
	InvocationContextMigrationTarget = "MigrationTarget"
	DomainTypeLibvirt                = "libvirt"
)

// Field numbers. OnDefineDomainParams and PreCloudInitIsoParams, and their results, are numbered the
// same in v1alpha2 and v1alpha3.
const (
	// InfoResult{name = 1; repeated HookPoint hookPoints = 3; repeated string versions = 4},
	// HookPoint{name = 1; int32 priority = 2}.
	fieldInfoName, fieldInfoHookPoints, fieldInfoVersions = 1, 3, 4
	fieldHookPointName                                    = 1
	// OnDefineDomainParams{bytes domainXML = 1; bytes vmi = 2}, OnDefineDomainResult{bytes domainXML = 1}.
	fieldDomainXML, fieldDomainVMI = 1, 2
	// PreCloudInitIsoParams{bytes cloudInitNoCloudSource = 1; bytes vmi = 2; bytes cloudInitData = 3},
	// PreCloudInitIsoResult{bytes cloudInitNoCloudSource = 1; bytes cloudInitData = 3}.
	fieldNoCloudSource, fieldCloudInitVMI, fieldCloudInitData = 1, 2, 3
	// MutateDomainRequest{string domain_type = 1; bytes domain = 2; bytes vmi = 3;
	// SidecarContext sidecar_context = 4}, SidecarContext{string invocation_context = 1},
	// MutateDomainResponse{bytes domain = 1}.
	fieldMutateType, fieldMutateDomain, fieldMutateVMI, fieldMutateContext = 1, 2, 3, 4
	fieldInvocationContext                                                 = 1
	fieldMutateResponseDomain                                              = 1
)

// readFields calls each for every field of the protobuf message msg, with the field's number, wire
// type and, for a length-delimited field, its bytes (a sub-slice of msg); other wire types are
// validated and skipped. proto3 semantics: for a repeated scalar field the caller keeps the last.
func readFields(what string, msg []byte, each func(num protowire.Number, typ protowire.Type, value []byte) error) error {
	for off := 0; off < len(msg); {
		num, typ, n := protowire.ConsumeTag(msg[off:])
		if n < 0 {
			return fmt.Errorf("%s: field tag at byte %d: %w", what, off, protowire.ParseError(n))
		}
		off += n
		var value []byte
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(msg[off:])
			if m < 0 {
				return fmt.Errorf("%s: field %d at byte %d: %w", what, num, off, protowire.ParseError(m))
			}
			value, n = v, m
		} else if n = protowire.ConsumeFieldValue(num, typ, msg[off:]); n < 0 {
			return fmt.Errorf("%s: field %d at byte %d: %w", what, num, off, protowire.ParseError(n))
		}
		off += n
		if err := each(num, typ, value); err != nil {
			return err
		}
	}
	return nil
}

// bytesFields returns the each function of readFields that stores the bytes fields named in into.
func bytesFields(into map[protowire.Number]*[]byte) func(protowire.Number, protowire.Type, []byte) error {
	return func(num protowire.Number, typ protowire.Type, value []byte) error {
		// A known field number with another wire type is an unknown field, as the protobuf runtime reads it.
		if dst, ok := into[num]; ok && typ == protowire.BytesType {
			*dst = value
		}
		return nil
	}
}

// domainRequest is OnDefineDomainParams, v1alpha2 or v1alpha3.
type domainRequest struct{ domainXML, vmi []byte }

func decodeDomainRequest(msg []byte) (domainRequest, error) {
	var r domainRequest
	err := readFields("OnDefineDomainParams", msg, bytesFields(
		map[protowire.Number]*[]byte{fieldDomainXML: &r.domainXML, fieldDomainVMI: &r.vmi}))
	return r, err
}

// cloudInitRequest is PreCloudInitIsoParams, v1alpha2 or v1alpha3, without cloudInitNoCloudSource:
// virt-launcher fills it with the user data and networkData that CloudInitData holds too
// (pkg/hooks/manager.go preCloudInitIsoDataToJSON), and the answer's echo is built from CloudInitData
// (cloudinit.Input.Merge, or Input.PassThrough when nothing is bound).
type cloudInitRequest struct{ vmi, cloudInitData []byte }

// decodeCloudInitRequest decodes PreCloudInitIsoParams into slices of their own size, so that the
// request (up to MaxRequestBytes, most of it the skipped echo) can be collected while the hook runs.
// CloudInitData is stored compacted (compactEscapes): up to 5/6 smaller.
func decodeCloudInitRequest(msg []byte) (cloudInitRequest, error) {
	var vmi, data []byte
	if err := readFields("PreCloudInitIsoParams", msg, bytesFields(
		map[protowire.Number]*[]byte{fieldCloudInitVMI: &vmi, fieldCloudInitData: &data})); err != nil {
		return cloudInitRequest{}, err
	}
	r := cloudInitRequest{vmi: bytes.Clone(vmi)}
	size, err := compactEscapes(bytes.NewReader(data), uint64(len(data)), nil)
	if err != nil {
		return cloudInitRequest{}, fmt.Errorf("PreCloudInitIsoParams: field %d: %w", fieldCloudInitData, err)
	}
	if data != nil {
		r.cloudInitData = make([]byte, size)
		if _, err := compactEscapes(bytes.NewReader(data), uint64(len(data)), r.cloudInitData); err != nil {
			return cloudInitRequest{}, fmt.Errorf("PreCloudInitIsoParams: field %d: %w", fieldCloudInitData, err)
		}
	}
	return r, nil
}

// mutateRequest is the Plugin API's MutateDomainRequest.
type mutateRequest struct {
	domainType, invocationContext string
	domain, vmi                   []byte
}

func decodeMutateRequest(msg []byte) (mutateRequest, error) {
	const what = "MutateDomainRequest"
	var r mutateRequest
	var domainType, sidecarContext []byte
	if err := readFields(what, msg, bytesFields(map[protowire.Number]*[]byte{
		fieldMutateType: &domainType, fieldMutateDomain: &r.domain, fieldMutateVMI: &r.vmi, fieldMutateContext: &sidecarContext,
	})); err != nil {
		return mutateRequest{}, err
	}
	var invocation []byte
	if err := readFields(what+".sidecar_context", sidecarContext, bytesFields(
		map[protowire.Number]*[]byte{fieldInvocationContext: &invocation})); err != nil {
		return mutateRequest{}, err
	}
	r.domainType, r.invocationContext = string(domainType), string(invocation)
	return r, nil
}

// appendBytesField appends a length-delimited field; proto3 leaves out an empty one.
func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// encodeInfoResult is InfoResult: name, one HookPoint (name only, priority 0) per point, versions.
func encodeInfoResult(name string, points, versions []string) []byte {
	var b []byte
	b = appendBytesField(b, fieldInfoName, []byte(name))
	for _, p := range points {
		b = appendBytesField(b, fieldInfoHookPoints, appendBytesField(nil, fieldHookPointName, []byte(p)))
	}
	for _, v := range versions {
		b = appendBytesField(b, fieldInfoVersions, []byte(v))
	}
	return b
}

// encodeBytesMessage is a message of bytes fields (OnDefineDomainResult, PreCloudInitIsoResult,
// MutateDomainResponse), in the order given, sized once.
func encodeBytesMessage(fields ...bytesField) []byte {
	size := 0
	for _, f := range fields {
		if len(f.value) > 0 {
			size += protowire.SizeTag(f.num) + protowire.SizeBytes(len(f.value))
		}
	}
	b := make([]byte, 0, size)
	for _, f := range fields {
		b = appendBytesField(b, f.num, f.value)
	}
	return b
}

type bytesField struct {
	num   protowire.Number
	value []byte
}
