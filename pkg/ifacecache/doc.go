// Package ifacecache owns KubeVirt PodIfaceCacheData files for bound interfaces (Writer.Sync: one
// file per interface at <dir>/<vmi-uid>/<iface>, atomic, rewritten only on change). It must never import
// kubevirt.io/kubevirt or kubevirt.io/api (the sidecar stays lean), never write outside its directory,
// never follow a symlink below it (the compute container can write there), and never let an
// unvalidated name become a path. Called by pkg/hooks (Writer) and cmd/sidecar render.
//
// # virt-handler integration
//
// The patch series in patches/kubevirt (README there) makes virt-handler read these files itself, at
// /pods/<pod-uid>/volumes/kubernetes.io~empty-dir/hook-sidecar-sockets/hook-sidecar-<n>/ifacecache/<vmi-uid>/<iface>:
// that is this directory only with the default --iface-cache-dir (/var/run/kubevirt-hooks/ifacecache,
// the sidecar's own subPath of the hooks emptyDir). It reports an entry only when every IP in it is in
// the pod's network-status annotation for that network, which the compute container cannot write.
//
// The files use KubeVirt's layout and JSON, so KubeVirt's own reader reads them when its cache
// creator maps its root (util.VirtPrivateDir + "/network-info-cache") onto our directory as
// virt-handler sees it (the pod's /var/run/kubevirt-hooks/<CONTAINER_NAME>/ifacecache):
//
//	type rootedCacheCreator struct{ dir string }
//
//	func (c rootedCacheCreator) New(path string) *cache.Cache {
//		rel, _ := filepath.Rel(filepath.Join(util.VirtPrivateDir, "network-info-cache"), path)
//		return cache.NewCustomCache(filepath.Join(c.dir, rel), kfs.New())
//	}
//
//	data, err := cache.ReadPodInterfaceCache(rootedCacheCreator{dir}, string(vmi.UID), iface.Name)
//
// Stock NetStat.UpdateStatus with that creator (NewNetStateWithCustomFactory) reports our
// addresses for the ua-sriov-<iface> hostdev, but it reads each file once and memoizes the
// result, an empty one too (netstat.go getPodInterfacefromFileCache): it misses entries written
// after its first update and later IP changes. To fix that and the guest-agent flap, replace its
// updateIfacesStatusFromPodCache and ifacesStatusFromGuestAgent steps with one stable merge. Its
// reference implementation is test/internal/statusmerge: KubeVirt cannot import this module (a patch
// series writes the merge in KubeVirt's own code, issue 17), so it lives in the test module as the
// oracle that series is tested against, not as a library the sidecar ships:
//
//	status := statusmerge.MergeInterfaceStatus(statusmerge.StatusInputs{
//		Domain:     statusFromDomain,        // ifacesStatusFromDomainInterfaces + sriovIfacesStatusFromDomainHostDevices
//		Spec:       vmi.Spec.Domain.Devices.Interfaces,
//		PodCache:   entriesReadOnThisUpdate, // by VMI interface name; PodIfaceCacheData JSON is identical
//		GuestAgent: fromDomainStatus,        // domain.Status.Interfaces: Mac, Ip, IPs, InterfaceName
//		Previous:   vmi.Status.Interfaces,
//		Primary:    primaryFamily,           // from MY_POD_IP
//	})
//
// and keep the steps after them (restorePrimaryIfaceStatus, movePrimaryIfaceStatusToFront,
// ifacesStatusFromMultus, restorePodIfaceNames) as they are.
package ifacecache
