package libvirt_test

import (
	"context"
	"encoding/xml"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"kubevirt.io/kubevirt/pkg/hooks"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/libvirtcheck"
)

// libvirtDomain is what these tests read of a domain as libvirt returns it.
type libvirtDomain struct {
	Devices struct {
		Controllers []struct {
			Type   string `xml:"type,attr"`
			Index  string `xml:"index,attr"`
			Model  string `xml:"model,attr"`
			Target *struct {
				Hotplug string `xml:"hotplug,attr"`
				BusNr   string `xml:"busNr,attr"`
			} `xml:"target"`
		} `xml:"controller"`
		Hostdevs []struct {
			Alias struct {
				Name string `xml:"name,attr"`
			} `xml:"alias"`
			Address *pciAddress `xml:"address"`
		} `xml:"hostdev"`
	} `xml:"devices"`
}

type pciAddress struct {
	Type     string `xml:"type,attr"`
	Domain   string `xml:"domain,attr"`
	Bus      string `xml:"bus,attr"`
	Slot     string `xml:"slot,attr"`
	Function string `xml:"function,attr"`
}

func parseLibvirtDomain(t *testing.T, domainXML []byte) libvirtDomain {
	t.Helper()
	var d libvirtDomain
	require.NoError(t, xml.Unmarshal(domainXML, &d))
	return d
}

// guestAddresses maps each hostdev alias to its guest PCI address.
func guestAddresses(t *testing.T, domainXML []byte) map[string]pciAddress {
	t.Helper()
	out := map[string]pciAddress{}
	for _, h := range parseLibvirtDomain(t, domainXML).Devices.Hostdevs {
		if h.Address != nil {
			out[h.Alias.Name] = *h.Address
		}
	}
	return out
}

// startSampleSidecar starts the built sidecar for the sample pod (cmd/sidecar/samples) with its hook socket
// where KubeVirt's Manager looks; the caller holds the hooks root lock.
func startSampleSidecar(t *testing.T, pod harness.SamplePod) {
	t.Helper()
	p := harness.TestPod(t, "libvirt-readback")
	require.NoError(t, p.WritePodInfo(pod.Metadata.Labels, pod.Metadata.Annotations))
	p.Start(t, sidecarBin)
}

// TestOnDefineDomain_LibvirtReadBack_ChangesNothing_OurHostdevsKeepTheirAddresses is the call KubeVirt
// main makes since #17605 (virtwrap/manager.go allocateHotplugPorts): after a define, virt-launcher reads the
// domain back from libvirt (util.GetDomainSpecWithFlags, DOMAIN_XML_INACTIVE), copies its devices into the
// spec and sends it through the hooks again. Here the read-back is libvirt 11.3's own, of the domain the
// built sidecar returned through KubeVirt's hook Manager for the sample VMI: our hostdevs now carry the
// guest addresses libvirt assigned (the sample's sriov-localnet sets no pciAddress; sriov-l2 sets
// 0000:07:00.0). OnDefineDomain must return the domain it was sent, unchanged, so that the next define
// keeps every address.
func TestOnDefineDomain_LibvirtReadBack_ChangesNothing_OurHostdevsKeepTheirAddresses(t *testing.T) {
	e := setup(t)
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pod, vmi := harness.LoadSamples(t)
	startSampleSidecar(t, pod)
	mgr := hooks.GetManager()
	require.NoError(t, mgr.Collect(1, 10*time.Second))

	spec := kubevirtDomainSpec(t, vmi)
	first, err := mgr.OnDefineDomain(spec, vmi)
	require.NoError(t, err)
	readBack, err := e.daemon.ReadBack(ctx, libvirtcheck.ForThisLibvirt([]byte(first)))
	require.NoErrorf(t, err, "libvirtd log:\n%s", e.daemon.LogTail())
	if out := os.Getenv("SRIOV_UDN_LIBVIRT_READBACK_OUT"); out != "" {
		// patches/kubevirt/testdata/hotplug keeps one such read-back for KubeVirt main's own hotplug code.
		require.NoError(t, os.WriteFile(out, readBack, 0o644))
	}
	assigned := guestAddresses(t, readBack)
	require.Contains(t, assigned, "ua-sriov-sriov-localnet", "libvirt assigned the VF without pciAddress a guest address")
	assert.Equal(t, pciAddress{Type: "pci", Domain: "0x0000", Bus: "0x07", Slot: "0x00", Function: "0x0"}, assigned["ua-sriov-sriov-l2"], "the VMI's pciAddress")

	// As allocateHotplugPorts does: the read-back's devices into the spec, then the hooks again.
	var back api.DomainSpec
	require.NoError(t, xml.Unmarshal(readBack, &back))
	again := spec.DeepCopy()
	back.Devices.DeepCopyInto(&again.Devices)
	sent, err := xml.MarshalIndent(again, "", "\t") // what the Manager sends (pkg/hooks/manager.go)
	require.NoError(t, err)
	second, err := mgr.OnDefineDomain(again, vmi)
	require.NoError(t, err)
	assert.Equal(t, string(sent), second, "OnDefineDomain changed the read-back")

	readBackAgain, err := e.daemon.ReadBack(ctx, libvirtcheck.ForThisLibvirt([]byte(second)))
	require.NoErrorf(t, err, "libvirtd log:\n%s", e.daemon.LogTail())
	assert.Equal(t, assigned, guestAddresses(t, readBackAgain), "every hostdev kept its guest address across the second define")
	t.Logf("guest addresses libvirt 11.3 assigned and kept: %v", assigned)
}
