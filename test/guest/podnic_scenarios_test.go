package guest

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/ovn"
)

// The scenarios of a VM as people write it: the pod NIC (masquerade or bridge) has no macAddress and
// the VMI gives no networkData, with every user-data format. Two of them start the VM twice on one disk
// onto a new pod, whose VF has new addresses and whose eth0 a new MAC, as a VM restart does.

var (
	podNICNoMAC       = vmiIface{Name: "default"}
	podNICBridgeNoMAC = vmiIface{Name: "default", Bridge: true}
	// secondaryOnLink is the layer2 secondary with an on-link route, as OVN-K marshals a nil next hop.
	secondaryOnLink = func(v4, v6 string) attachment {
		a := secondaryL2
		a.Net.IPAddresses = []string{v4 + "/24", v6 + "/64"}
		a.Net.Routes = []ovn.PodRoute{{Dest: "192.168.77.0/24", NextHop: ""}}
		a.StatusIPs = []string{v4, v6}
		return a
	}
)

func podNICScenarios() ([]scenario, error) {
	ccUser, err := cloudConfigUserData("runcmd")
	if err != nil {
		return nil, err
	}
	userND, err := userNetworkDataV2()
	if err != nil {
		return nil, err
	}
	mimeUser, err := mimeUserData("mime")
	if err != nil {
		return nil, err
	}
	includedCC, err := cloudConfigUserData("include")
	if err != nil {
		return nil, err
	}
	type startDef struct {
		vfV4, vfV6 string
		podMAC     string // the new pod's eth0
		kubevirt   bool   // KubeVirt's tap generator writes it into the domain (else the sidecar must)
		uidSuffix  string
	}
	type def struct {
		name    string
		vmiName string
		podNIC  vmiIface
		ci      cloudInitVolume
		include string
		work    []string // user work that must have run exactly once by every start
		starts  []startDef
		matrix  bool // runs on every image (scenario.matrix)
	}
	twoStarts := []startDef{
		{vfV4: "10.200.0.5", vfV6: "fd10:200::5", podMAC: "0a:58:0a:f4:01:07", kubevirt: true},
		{vfV4: "10.200.0.6", vfV6: "fd10:200::6", podMAC: "0a:58:0a:f4:01:08", kubevirt: true, uidSuffix: "restart"},
	}
	oneStart := twoStarts[:1]
	defs := []def{
		{name: "NoCloud_PodNICWithoutMAC_CloudConfig_EveryStartAppliesItsAddresses", vmiName: "guest-restart-nocloud",
			podNIC: podNICNoMAC, ci: cloudInitVolume{UserData: ccUser}, work: []string{"runcmd"}, starts: twoStarts, matrix: true},
		{name: "ConfigDrive_PodNICWithoutMACBridge_Script_DomainMACFromSidecar_EveryStartAppliesItsAddresses", vmiName: "guest-restart-configdrive",
			podNIC: podNICBridgeNoMAC, ci: cloudInitVolume{ConfigDrive: true, UserData: scriptUserData("script")}, work: []string{"script"}, matrix: true,
			starts: []startDef{
				{vfV4: "10.200.0.5", vfV6: "fd10:200::5", podMAC: "0a:58:0a:f4:01:07"},
				{vfV4: "10.200.0.6", vfV6: "fd10:200::6", podMAC: "0a:58:0a:f4:01:08", uidSuffix: "restart"},
			}},
		{name: "NoCloud_PodNICWithoutMAC_MIMEUserData_PartsRunAndNetworkApplied", vmiName: "guest-mime",
			podNIC: podNICNoMAC, ci: cloudInitVolume{UserData: mimeUser}, work: []string{"mime-cloud-config", "mime-script"}, starts: oneStart, matrix: true},
		{name: "NoCloud_PodNICWithoutMAC_IncludeUserData_IncludedRunsAndNetworkApplied", vmiName: "guest-include",
			podNIC: podNICNoMAC, ci: cloudInitVolume{UserData: includeUserData("http://" + includeHost + "/cc.yaml")}, include: includedCC,
			work: []string{"include"}, starts: oneStart},
		// No user data: KubeVirt then requires networkData (ReadCloudInitVolumeDataSource), so this is the
		// user-networkData path: the user's static pod NIC (matched by its macAddress) stands, ours beside it,
		// and the user data is our cloud-config alone.
		{name: "NoCloud_NoUserData_UserNetworkDataForPodNIC_BothApplied", vmiName: "guest-no-userdata",
			podNIC: podNIC, ci: cloudInitVolume{NetworkData: userND}, starts: oneStart, matrix: true},
	}
	var out []scenario
	for _, d := range defs {
		sc := scenario{name: d.name, include: d.include, matrix: d.matrix}
		for i, sd := range d.starts {
			vmi := newVMI(d.vmiName, []vmiIface{d.podNIC, secondary}, d.ci)
			if sd.uidSuffix != "" {
				vmi.UID = types.UID(uuidFor("vmi/" + d.vmiName + "/" + sd.uidSuffix))
			}
			ann, err := podAnnotationsWithPodMAC(vmi, "primary", sd.podMAC, []attachment{secondaryOnLink(sd.vfV4, sd.vfV6)})
			if err != nil {
				return nil, err
			}
			st := start{vmi: vmi, labels: podLabels(vmi), annotations: ann}
			if sd.kubevirt {
				st.kubevirtPodMAC = sd.podMAC
			}
			sd, work, n, d := sd, d.work, i+1, d
			st.check = func(t *testing.T, r *Report) {
				checkCloudInitClean(t, r, datasourceOf(d.ci))
				// Only this start's addresses: the guest applied the new pod's config, not its first boot's.
				checkAddresses(t, r, secondaryMAC, sd.vfV4+"/24", sd.vfV6+"/64")
				checkNoDefaultRoute(t, r, secondaryMAC)
				checkOnLinkRoute(t, r, secondaryMAC, "192.168.77.0/24")
				if d.ci.NetworkData != "" {
					// The user's config of the pod NIC stands.
					checkAddresses(t, r, podNICMAC, userStaticAddr)
				} else {
					// The pod NIC carries the pod interface's MAC (from the domain) and gets its DHCP lease.
					checkDHCP(t, r, sd.podMAC)
				}
				for _, w := range work {
					assert.Equalf(t, 1, r.UserWork[w], "the user's %s ran once in all, by start %d (per instance)", w, n)
				}
			}
			sc.starts = append(sc.starts, st)
		}
		out = append(out, sc)
	}
	return out, nil
}

func datasourceOf(ci cloudInitVolume) string {
	if ci.ConfigDrive {
		return datasourceCD
	}
	return datasourceNoCld
}

// checkOnLinkRoute asserts a route to dst through the NIC with no gateway.
func checkOnLinkRoute(t *testing.T, r *Report, mac, dst string) {
	t.Helper()
	unspecified := "0.0.0.0"
	if netip.MustParsePrefix(dst).Addr().Is6() {
		unspecified = "::"
	}
	checkNMRoute(t, r, mac, dst, unspecified)
	l := guestLink(t, r, mac)
	for _, rt := range r.RoutesVia(l.Name) {
		if rt.Dst == dst {
			assert.Falsef(t, rt.Gateway.IsValid(), "route %s via guest NIC %s has gateway %s, want on-link", dst, l.Name, rt.Gateway)
			return
		}
	}
	assert.Failf(t, "on-link route missing", "no route to %s through guest NIC %s (%s)", dst, l.Name, mac)
}
