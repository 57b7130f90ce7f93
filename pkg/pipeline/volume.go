package pipeline

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// cloudInitVolume returns the VMI's cloud-init volume as virt-launcher picks it: the first volume
// with cloudInitNoCloud or cloudInitConfigDrive (pkg/cloud-init/cloud-init.go ReadCloudInitVolumeDataSource).
func cloudInitVolume(vmi *model.VirtualMachineInstance) (model.Volume, bool) {
	if vmi == nil {
		return model.Volume{}, false
	}
	for _, v := range vmi.Spec.Volumes {
		if v.CloudInitNoCloud != nil || v.CloudInitConfigDrive != nil {
			return v, true
		}
	}
	return model.Volume{}, false
}

// VolumeCloudInitData builds, from the VMI alone, the CloudInitData JSON virt-launcher would pass to
// PreCloudInitIso: DataSource, VolumeName and the networkData (inline or base64); UserData and metadata
// are left out (render shows network config only). ok is false when the VMI has no cloud-init volume.
// A networkDataSecretRef cannot be read here: it is reported as a warning and rendered as no networkData.
func VolumeCloudInitData(vmi *model.VirtualMachineInstance) (data []byte, dataSource string, warnings []Warning, ok bool, err error) {
	v, ok := cloudInitVolume(vmi)
	if !ok {
		return nil, "", nil, false, nil
	}
	src, dataSource, field := v.CloudInitNoCloud, "noCloud", "cloudInitNoCloud"
	if src == nil {
		src, dataSource, field = v.CloudInitConfigDrive, "configDrive", "cloudInitConfigDrive"
	}
	network := src.NetworkData
	switch {
	case network != "":
	case src.NetworkDataBase64 != "":
		raw, err := base64.StdEncoding.DecodeString(src.NetworkDataBase64)
		if err != nil {
			return nil, "", nil, false, fmt.Errorf("VMI volume %q: %s.networkDataBase64: %w", v.Name, field, err)
		}
		network = string(raw)
	case src.NetworkDataSecretRef != nil:
		warnings = append(warnings, Warning{Code: WarnNetworkDataInSecret, Message: fmt.Sprintf(
			"volume %q takes networkData from Secret %q, which render cannot read: shown as if there were none; "+
				"the hook merges with the Secret's content", v.Name, src.NetworkDataSecretRef.Name)})
	}
	data, err = json.Marshal(map[string]string{"DataSource": dataSource, "NetworkData": network, "VolumeName": v.Name})
	if err != nil {
		return nil, "", nil, false, err
	}
	return data, dataSource, warnings, true, nil
}
