package guest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strings"

	kvv1 "kubevirt.io/api/core/v1"
	cloudinit "kubevirt.io/kubevirt/pkg/cloud-init"
	"kubevirt.io/kubevirt/pkg/hooks"
)

// qemuUID is the uid KubeVirt's images give the qemu user; KubeVirt's ISO generator chowns its
// files to the user named "qemu" (pkg/ephemeral-disk-utils/utils.go DefaultOwnershipManager).
const qemuUID = "107"

// ensureQemuUser makes sure a "qemu" user exists, creating a system user (uid 107 when free) if
// not. It says what it did, for the test log.
func ensureQemuUser() (string, error) {
	if _, err := user.Lookup("qemu"); err == nil {
		return "user qemu exists", nil
	}
	args := []string{"--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin"}
	if _, err := user.LookupId(qemuUID); err != nil {
		args = append(args, "--uid", qemuUID)
	}
	args = append(args, "qemu")
	useradd, err := findCommand("useradd")
	if err != nil {
		return "", err
	}
	if out, err := exec.Command(useradd, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("useradd %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return "created system user qemu (KubeVirt's ISO generator chowns to it)", nil
}

// launcherPreStart is virt-launcher's pre-start cloud-init path (pkg/virt-launcher/virtwrap/
// manager.go preStartHook), with KubeVirt's own functions: ReadCloudInitVolumeDataSource, then the
// hook Manager's PreCloudInitIso, which calls the sidecar. The caller must have collected the
// sidecar with hooks.GetManager().Collect. It returns the data as KubeVirt keeps it for the ISO.
func launcherPreStart(vmi *kvv1.VirtualMachineInstance, secretSourceDir string) (*cloudinit.CloudInitData, error) {
	data, err := cloudinit.ReadCloudInitVolumeDataSource(vmi, secretSourceDir)
	if err != nil {
		return nil, fmt.Errorf("ReadCloudInitVolumeDataSource: %w", err)
	}
	if data == nil {
		return nil, fmt.Errorf("VMI %s has no cloud-init volume", vmi.Name)
	}
	data, err = hooks.GetManager().PreCloudInitIso(vmi, data)
	if err != nil {
		return nil, fmt.Errorf("PreCloudInitIso hook failed: %w", err)
	}
	return data, nil
}

// launcherGenerateISO is the second half of virt-launcher's path (generateSomeCloudInitISO, after
// the domain is defined): PrepareLocalPath and GenerateLocalData write the files and build the ISO
// (xorrisofs), chowned to qemu. cloudinit.SetLocalDirectory must have been called. It returns the
// ISO's path (GetIsoFilePath).
func launcherGenerateISO(vmi *kvv1.VirtualMachineInstance, data *cloudinit.CloudInitData) (string, error) {
	if err := cloudinit.PrepareLocalPath(vmi.Name, vmi.Namespace); err != nil {
		return "", fmt.Errorf("PrepareLocalPath: %w", err)
	}
	instancetype := vmi.Annotations[kvv1.ClusterInstancetypeAnnotation]
	if instancetype == "" {
		instancetype = vmi.Annotations[kvv1.InstancetypeAnnotation]
	}
	if err := cloudinit.GenerateLocalData(vmi, instancetype, data); err != nil {
		return "", fmt.Errorf("GenerateLocalData: %w", err)
	}
	iso := cloudinit.GetIsoFilePath(data.DataSource, vmi.Name, vmi.Namespace)
	if _, err := os.Stat(iso); err != nil {
		return "", fmt.Errorf("KubeVirt built no ISO at %s: %w", iso, err)
	}
	return iso, nil
}
