package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc"
	v1 "kubevirt.io/api/core/v1"
	hooksInfo "kubevirt.io/kubevirt/pkg/hooks/info"
	hooksV1alpha2 "kubevirt.io/kubevirt/pkg/hooks/v1alpha2"
	hooksV1alpha3 "kubevirt.io/kubevirt/pkg/hooks/v1alpha3"
	"kubevirt.io/kubevirt/pkg/network/downwardapi"
)

// name is what Info answers and what the logs say.
const name = "vf-standin"

// maxDeviceInfoBytes bounds the device-info file it reads (kubelet caps a pod's annotations at 256 KiB).
const maxDeviceInfoBytes = 256 << 10

type config struct {
	socketDir, socketName string
	deviceInfoFile        string
	binding               string
	after                 string        // the socket name it listens after (awaitListener)
	afterTimeout          time.Duration // how long it waits for it
	afterMargin           time.Duration // how long that socket must have listened before this one does
}

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.StringVar(&cfg.socketDir, "socket-dir", "/var/run/kubevirt-hooks", "directory of the hook socket (KubeVirt's hooks mount)")
	fs.StringVar(&cfg.socketName, "socket-name", "vf-standin.sock", "hook socket file name")
	fs.StringVar(&cfg.deviceInfoFile, "device-info-file", downwardapi.MountPath+"/"+downwardapi.NetworkInfoVolumePath,
		"device-info DownwardAPI file (kubevirt.io/network-info) of the binding")
	fs.StringVar(&cfg.binding, "binding", "sriov-udn", "the binding plugin whose hostdevs it checks and replaces")
	fs.StringVar(&cfg.after, "after-socket", "sriov-udn-binding.sock",
		"listen only once a unix socket of this name listens in the pod's network namespace, so that KubeVirt's hook Manager calls it after that sidecar (empty: at once)")
	fs.DurationVar(&cfg.afterTimeout, "after-timeout", 60*time.Second, "how long to wait for --after-socket")
	fs.DurationVar(&cfg.afterMargin, "after-margin", 2*time.Second,
		"how long --after-socket must have listened before this stand-in listens: several of the hook Manager's 300 ms passes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if cfg.after != "" {
		start := time.Now()
		logger.Info("waiting for the binding's sidecar to listen", "socket", cfg.after, "timeout", cfg.afterTimeout.String())
		if err := awaitListener(ctx, procNetUnix, cfg.after, cfg.afterTimeout, 20*time.Millisecond); err != nil {
			logger.Warn("listening anyway: KubeVirt may call this stand-in first", "error", err.Error())
		} else {
			logger.Info("the binding's sidecar listens", "socket", cfg.after, "waited", time.Since(start).String(), "margin", cfg.afterMargin.String())
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(cfg.afterMargin):
			}
		}
	}
	path := filepath.Join(cfg.socketDir, cfg.socketName)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", path, err)
	}
	srv := grpc.NewServer()
	cb := callbacks{cfg: cfg, log: logger}
	hooksInfo.RegisterInfoServer(srv, info{})
	hooksV1alpha3.RegisterCallbacksServer(srv, v1alpha3{cb})
	hooksV1alpha2.RegisterCallbacksServer(srv, v1alpha2{cb})
	go func() {
		<-ctx.Done()
		srv.Stop()
	}()
	logger.Info("started", "socket", path, "binding", cfg.binding, "deviceInfo", cfg.deviceInfoFile)
	if err := srv.Serve(l); err != nil {
		return fmt.Errorf("serve %s: %w", path, err)
	}
	return nil
}

type info struct{}

func (info) Info(context.Context, *hooksInfo.InfoParams) (*hooksInfo.InfoResult, error) {
	return &hooksInfo.InfoResult{
		Name:       name,
		Versions:   []string{hooksV1alpha3.Version, hooksV1alpha2.Version},
		HookPoints: []*hooksInfo.HookPoint{{Name: hooksInfo.OnDefineDomainHookPointName}},
	}, nil
}

// callbacks holds what both protocol versions share.
type callbacks struct {
	cfg config
	log *slog.Logger
}

// onDefineDomain swaps the hostdevs of the binding's interfaces; its error fails the VM's start.
func (c callbacks) onDefineDomain(vmiJSON, domainXML []byte) ([]byte, error) {
	var vmi v1.VirtualMachineInstance
	if err := json.Unmarshal(vmiJSON, &vmi); err != nil {
		return nil, fmt.Errorf("%w: OnDefineDomain VMI JSON: %w", ErrInput, err)
	}
	devInfo, err := readDeviceInfo(c.cfg.deviceInfoFile)
	if err != nil {
		return nil, err
	}
	out, err := Swap(domainXML, &vmi, devInfo, c.cfg.binding)
	if err != nil {
		c.log.Error("OnDefineDomain refused", "vmi", vmi.Namespace+"/"+vmi.Name, "error", err.Error())
		return nil, err
	}
	c.log.Info("OnDefineDomain ok", "vmi", vmi.Namespace+"/"+vmi.Name, "changed", len(out) != len(domainXML) || string(out) != string(domainXML))
	return out, nil
}

// readDeviceInfo reads the binding's device-info file (KubeVirt's kubevirt.io/network-info).
func readDeviceInfo(path string) (downwardapi.NetworkInfo, error) {
	var ni downwardapi.NetworkInfo
	f, err := os.Open(path)
	if err != nil {
		return ni, fmt.Errorf("%w: device-info: %w", ErrInput, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDeviceInfoBytes+1))
	if err != nil {
		return ni, fmt.Errorf("%w: device-info %s: %w", ErrInput, path, err)
	}
	if len(b) > maxDeviceInfoBytes {
		return ni, fmt.Errorf("%w: device-info %s: over %d bytes", ErrInput, path, maxDeviceInfoBytes)
	}
	if len(b) == 0 {
		return ni, fmt.Errorf("%w: device-info %s: empty (virt-controller writes kubevirt.io/network-info once the pod's containers are ready)", ErrInput, path)
	}
	if err := json.Unmarshal(b, &ni); err != nil {
		return ni, fmt.Errorf("%w: device-info %s: %w", ErrInput, path, err)
	}
	return ni, nil
}

type v1alpha3 struct{ c callbacks }

func (s v1alpha3) OnDefineDomain(_ context.Context, p *hooksV1alpha3.OnDefineDomainParams) (*hooksV1alpha3.OnDefineDomainResult, error) {
	out, err := s.c.onDefineDomain(p.GetVmi(), p.GetDomainXML())
	if err != nil {
		return nil, err
	}
	return &hooksV1alpha3.OnDefineDomainResult{DomainXML: out}, nil
}

// PreCloudInitIso is not subscribed (Info lists OnDefineDomain only); it passes the data through.
func (v1alpha3) PreCloudInitIso(_ context.Context, p *hooksV1alpha3.PreCloudInitIsoParams) (*hooksV1alpha3.PreCloudInitIsoResult, error) {
	return &hooksV1alpha3.PreCloudInitIsoResult{CloudInitData: p.GetCloudInitData(), CloudInitNoCloudSource: p.GetCloudInitNoCloudSource()}, nil
}

func (v1alpha3) Shutdown(context.Context, *hooksV1alpha3.ShutdownParams) (*hooksV1alpha3.ShutdownResult, error) {
	return &hooksV1alpha3.ShutdownResult{}, nil
}

type v1alpha2 struct{ c callbacks }

func (s v1alpha2) OnDefineDomain(_ context.Context, p *hooksV1alpha2.OnDefineDomainParams) (*hooksV1alpha2.OnDefineDomainResult, error) {
	out, err := s.c.onDefineDomain(p.GetVmi(), p.GetDomainXML())
	if err != nil {
		return nil, err
	}
	return &hooksV1alpha2.OnDefineDomainResult{DomainXML: out}, nil
}

func (v1alpha2) PreCloudInitIso(_ context.Context, p *hooksV1alpha2.PreCloudInitIsoParams) (*hooksV1alpha2.PreCloudInitIsoResult, error) {
	return &hooksV1alpha2.PreCloudInitIsoResult{CloudInitData: p.GetCloudInitData(), CloudInitNoCloudSource: p.GetCloudInitNoCloudSource()}, nil
}
