package hooks

import "context"

// Handler does the work behind the Callbacks services. Implementations must be safe for concurrent
// use and must honour ctx: it is cancelled when the call's deadline passes or the server stops.
type Handler interface {
	// OnDefineDomain returns the domain XML to hand back to virt-launcher. virt-launcher calls it
	// several times per VM start (pkg/virt-launcher/virtwrap/manager.go allocateHotplugPorts), so
	// it must be idempotent.
	OnDefineDomain(ctx context.Context, vmiJSON, domainXML []byte) ([]byte, error)
	// PreCloudInitIso returns the CloudInitData JSON and the legacy CloudInitNoCloudSource JSON to
	// hand back (pkg/hooks/manager.go preCloudInitIsoValidateResult reads the second only when the first
	// has no UserData or no metadata). The request's own CloudInitNoCloudSource is a copy of
	// CloudInitData's user data and networkData (manager.go preCloudInitIsoDataToJSON): it is never
	// decoded (codec.go), so the Handler gets CloudInitData alone.
	PreCloudInitIso(ctx context.Context, vmiJSON, cloudInitData []byte) (newCloudInitData, noCloudSource []byte, err error)
}
