package bench

import (
	"fmt"
	"time"

	"k8s.io/kubernetes/pkg/fieldpath"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/cloudinit"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/kubevirtjson"
)

// RenderAnnotationBytes pads the annotations of every render case: real virt-launcher pods carry
// large unrelated annotations, and DESIGN.md section 5 states the render target at 256 KiB.
const RenderAnnotationBytes = 256 << 10

// RenderResult is the in-process cost of turning annotations into network-config for n interfaces.
type RenderResult struct {
	Interfaces      int `json:"interfaces"`
	AnnotationBytes int `json:"annotation_bytes"`
	OutputBytes     int `json:"output_bytes"`
	// Parse is what the sidecar does after a swap: downwardapi.ParseFormatMap of the annotations
	// file (kubelet's fieldpath.FormatMap, the whole padded map) and SnapshotFromMaps; Build is model.Build; Render is
	// cloudinit.RenderNetworkConfigV1; Total is all three.
	Parse  Summary `json:"parse"`
	Build  Summary `json:"build"`
	Render Summary `json:"render"`
	Total  Summary `json:"total"`
}

// renderBudget bounds each case: at least minRounds rounds, then stop after the budget.
const (
	renderMinRounds = 50
	renderBudget    = time.Second
)

// MeasureRender times parse + Build + RenderNetworkConfigV1 for n bound interfaces and checks the
// result has one entry per interface (a render that silently drops NICs is no measurement).
func MeasureRender(n int) (RenderResult, error) {
	res := RenderResult{Interfaces: n}
	ifaces := Ifaces(n, BaseNAD)
	vmi, err := kubevirtjson.ConvertVMI(VMI(ifaces))
	if err != nil {
		return RenderResult{}, err
	}
	ann, err := Annotations(ifaces, RenderAnnotationBytes)
	if err != nil {
		return res, err
	}
	for k, v := range ann {
		res.AnnotationBytes += len(k) + len(v)
	}
	file := []byte(fieldpath.FormatMap(ann))
	opts := model.Options{BindingName: BindingName}
	var parse, build, render, total []time.Duration
	start := time.Now()
	for round := 0; round < renderMinRounds || time.Since(start) < renderBudget; round++ {
		t0 := time.Now()
		parsed, err := downwardapi.ParseFormatMap("annotations", file)
		if err != nil {
			return res, fmt.Errorf("parse annotations file for %d interfaces: %w", n, err)
		}
		snap := downwardapi.SnapshotFromMaps(nil, parsed)
		t1 := time.Now()
		bound, err := model.Build(vmi, snap, opts)
		if err != nil {
			return res, fmt.Errorf("model.Build for %d interfaces: %w", n, err)
		}
		t2 := time.Now()
		out, err := cloudinit.RenderNetworkConfigV1(bound)
		if err != nil {
			return res, fmt.Errorf("RenderNetworkConfigV1 for %d interfaces: %w", n, err)
		}
		t3 := time.Now()
		if round == 0 {
			if err := checkBound(bound, ifaces); err != nil {
				return res, err
			}
			res.OutputBytes = len(out)
		}
		parse, build, render, total = append(parse, t1.Sub(t0)), append(build, t2.Sub(t1)), append(render, t3.Sub(t2)), append(total, t3.Sub(t0))
	}
	res.Parse, res.Build, res.Render, res.Total = Summarize(parse), Summarize(build), Summarize(render), Summarize(total)
	return res, nil
}

func checkBound(bound []model.BoundInterface, ifaces []Iface) error {
	if len(bound) != len(ifaces) {
		return fmt.Errorf("model.Build returned %d bound interfaces for %d", len(bound), len(ifaces))
	}
	for i, b := range bound {
		if b.MAC.String() != ifaces[i].MAC || len(b.Addresses) != 2 {
			return fmt.Errorf("interface %s: MAC %s, %d addresses; want %s and 2 (fixture not understood)",
				b.Name, b.MAC, len(b.Addresses), ifaces[i].MAC)
		}
	}
	return nil
}
