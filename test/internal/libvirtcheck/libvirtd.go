package libvirtcheck

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/debroot"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/trixietools"
)

// qemuConf lets the daemon run in a chroot without the libvirt-qemu user's home or a security driver;
// neither takes part in parsing or validating a domain definition. A domain it starts (Create) logs qemu's
// output to a file itself rather than through virtlogd, which this daemon does not run.
const qemuConf = "user = \"root\"\ngroup = \"root\"\nsecurity_driver = \"none\"\nstdio_handler = \"file\"\nnamespaces = []\ncgroup_controllers = []\n"

// Daemon is a libvirtd of the trixie tools root, private to one test process: its /run is a host directory
// (where its socket lives), its state, cache, log and domain-definition directories are tmpfs in its own
// mount namespace, so nothing it writes reaches the cached root or another daemon.
type Daemon struct {
	root  trixietools.Root
	state string
	cmd   *exec.Cmd
	exit  chan error
	log   string
	// mu serialises define/undefine: the domain name of one definition must not meet another's.
	mu sync.Mutex
	// virtType is what VirtType found ("" until asked).
	virtType string
}

// Start starts libvirtd in root with stateDir (an empty host directory) as its /run. The daemon gets its
// listening socket from the caller (systemd socket activation: LISTEN_FDS, LISTEN_FDNAMES=libvirtd.socket,
// libvirt's src/util/virsystemd.c), so a client connecting right after Start is queued, never refused:
// readiness needs no polling. The daemon lives until Close, whatever ctx does after Start returns.
func Start(ctx context.Context, root trixietools.Root, stateDir string) (*Daemon, error) {
	run := filepath.Join(stateDir, "run")
	if err := os.MkdirAll(filepath.Join(run, "libvirt"), 0o755); err != nil {
		return nil, fmt.Errorf("libvirtd state dir: %w", err)
	}
	conf := filepath.Join(stateDir, "qemu.conf")
	if err := os.WriteFile(conf, []byte(qemuConf), 0o644); err != nil {
		return nil, fmt.Errorf("libvirtd qemu.conf: %w", err)
	}
	sock := filepath.Join(run, "libvirt", "libvirt-sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("libvirtd socket %s: %w", sock, err)
	}
	ln.SetUnlinkOnClose(false)
	lnFile, err := ln.File()
	_ = ln.Close()
	if err != nil {
		return nil, fmt.Errorf("libvirtd socket file: %w", err)
	}
	defer lnFile.Close()

	mounts := []trixietools.Mount{
		{Source: run, Target: "run"},
		{Target: "var/lib/libvirt"}, {Target: "var/cache/libvirt"}, {Target: "var/log/libvirt"},
		{Target: "etc/libvirt/qemu"},
		{Source: conf, Target: "etc/libvirt/qemu.conf"},
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cmd, err := root.Command(context.Background(), mounts, "libvirtd")
	if err != nil {
		return nil, err
	}
	d := &Daemon{root: root, state: stateDir, cmd: cmd, exit: make(chan error, 1), log: filepath.Join(stateDir, "libvirtd.log")}
	logFile, err := os.Create(d.log)
	if err != nil {
		return nil, fmt.Errorf("libvirtd log: %w", err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{lnFile} // fd 3
	cmd.Env = append(cmd.Env, "LISTEN_FDS=1", "LISTEN_FDNAMES=libvirtd.socket")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start libvirtd: %w", err)
	}
	go func() { d.exit <- cmd.Wait() }()
	return d, nil
}

// Version is what `virsh version --daemon` says of the running daemon.
func (d *Daemon) Version(ctx context.Context) (string, error) {
	return d.virsh(ctx, nil, "version", "--daemon")
}

// VirtType is the domain type this daemon's qemu offers for x86_64 guests, as `virsh capabilities`
// lists it: "kvm" where the host has a usable /dev/kvm, else "qemu" (TCG). Asked once per daemon.
func (d *Daemon) VirtType(ctx context.Context) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.virtTypeLocked(ctx)
}

func (d *Daemon) virtTypeLocked(ctx context.Context) (string, error) {
	if d.virtType != "" {
		return d.virtType, nil
	}
	out, err := d.virsh(ctx, nil, "capabilities")
	if err != nil {
		return "", err
	}
	t, err := virtTypeOf([]byte(out))
	if err != nil {
		return "", err
	}
	d.virtType = t
	return t, nil
}

// virtTypeOf picks the domain type for x86_64 guests from `virsh capabilities` output: "kvm" when listed,
// else "qemu"; an error when the capabilities list no x86_64 guest at all.
func virtTypeOf(capabilitiesXML []byte) (string, error) {
	var caps struct {
		Guests []struct {
			Arch struct {
				Name    string `xml:"name,attr"`
				Domains []struct {
					Type string `xml:"type,attr"`
				} `xml:"domain"`
			} `xml:"arch"`
		} `xml:"guest"`
	}
	if err := xml.Unmarshal(capabilitiesXML, &caps); err != nil {
		return "", fmt.Errorf("virsh capabilities: %w", err)
	}
	found := ""
	for _, g := range caps.Guests {
		if g.Arch.Name != "x86_64" {
			continue
		}
		for _, dom := range g.Arch.Domains {
			switch {
			case dom.Type == "kvm":
				return "kvm", nil
			case dom.Type == "qemu":
				found = "qemu"
			}
		}
	}
	if found == "" {
		return "", errors.New("virsh capabilities: no x86_64 guest with domain type kvm or qemu")
	}
	return found, nil
}

// Define runs `virsh define --validate` on domainXML (the qemu driver's parse, post-parse and validation,
// and the RNG schema when validate is set), then undefines it. It never starts the domain. A domain of
// type "kvm" is defined as this daemon's VirtType when the host offers no kvm (WithVirtType says why);
// nothing else in it changes. The error carries virsh's own words.
func (d *Daemon) Define(ctx context.Context, domainXML []byte, validate bool) error {
	var named struct {
		Type string `xml:"type,attr"`
		Name string `xml:"name"`
	}
	if err := xml.Unmarshal(domainXML, &named); err != nil {
		return fmt.Errorf("domain XML: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if named.Type == "kvm" {
		virtType, err := d.virtTypeLocked(ctx)
		if err != nil {
			return err
		}
		domainXML = WithVirtType(domainXML, virtType)
	}
	in := filepath.Join(d.state, "run", "define.xml")
	if err := os.WriteFile(in, domainXML, 0o644); err != nil {
		return err
	}
	args := []string{"define", "/run/define.xml"}
	if validate {
		args = append(args, "--validate")
	}
	if _, err := d.virsh(ctx, nil, args...); err != nil {
		return err
	}
	if _, err := d.virsh(ctx, nil, "undefine", named.Name); err != nil {
		return fmt.Errorf("undefine %q after define: %w", named.Name, err)
	}
	return nil
}

// ReadBack defines domainXML (as Define does, without the schema) and returns the domain as libvirt then
// keeps it (`virsh dumpxml --inactive`): with the PCI addresses, controllers and defaults the qemu driver
// assigned, which is what virt-launcher reads back (util.GetDomainSpecWithFlags, DOMAIN_XML_INACTIVE).
// The domain is undefined again.
func (d *Daemon) ReadBack(ctx context.Context, domainXML []byte) ([]byte, error) {
	name, domainXML, err := d.prepare(ctx, domainXML)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.virshWithFile(ctx, "define.xml", domainXML, "define", "/run/define.xml"); err != nil {
		return nil, err
	}
	out, dumpErr := d.virsh(ctx, nil, "dumpxml", "--inactive", name)
	if _, err := d.virsh(ctx, nil, "undefine", name); err != nil {
		return nil, fmt.Errorf("undefine %q after define: %w", name, err)
	}
	if dumpErr != nil {
		return nil, dumpErr
	}
	return []byte(out), nil
}

// Running is a transient domain this daemon runs (virsh create), until Destroy.
type Running struct {
	d    *Daemon
	Name string
}

// Create starts domainXML as a transient domain (`virsh create`): qemu runs it (TCG where the host offers
// no kvm). The caller destroys it.
func (d *Daemon) Create(ctx context.Context, domainXML []byte) (*Running, error) {
	name, domainXML, err := d.prepare(ctx, domainXML)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.virshWithFile(ctx, "create.xml", domainXML, "create", "/run/create.xml"); err != nil {
		return nil, err
	}
	return &Running{d: d, Name: name}, nil
}

// DetachDevice runs `virsh detach-device --live` of deviceXML on the running domain and returns virsh's
// answer: what virt-launcher's DetachDeviceFlags(VIR_DOMAIN_AFFECT_LIVE) gets from libvirt and qemu.
func (r *Running) DetachDevice(ctx context.Context, deviceXML []byte) (string, error) {
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	return r.d.virshWithFile(ctx, "device.xml", deviceXML, "detach-device", r.Name, "/run/device.xml", "--live")
}

// XML is the running domain's live XML (`virsh dumpxml`).
func (r *Running) XML(ctx context.Context) ([]byte, error) {
	out, err := r.d.virsh(ctx, nil, "dumpxml", r.Name)
	return []byte(out), err
}

// Destroy stops the domain (`virsh destroy`); a transient domain is then gone.
func (r *Running) Destroy(ctx context.Context) error {
	_, err := r.d.virsh(ctx, nil, "destroy", r.Name)
	return err
}

// prepare returns the domain's name and domainXML as this daemon can take it: type kvm becomes VirtType
// where the host offers no kvm (WithVirtType says why).
func (d *Daemon) prepare(ctx context.Context, domainXML []byte) (string, []byte, error) {
	var named struct {
		Type string `xml:"type,attr"`
		Name string `xml:"name"`
	}
	if err := xml.Unmarshal(domainXML, &named); err != nil {
		return "", nil, fmt.Errorf("domain XML: %w", err)
	}
	if named.Type == "kvm" {
		virtType, err := d.VirtType(ctx)
		if err != nil {
			return "", nil, err
		}
		domainXML = WithVirtType(domainXML, virtType)
	}
	return named.Name, domainXML, nil
}

// virshWithFile writes data to the daemon's /run/<file> (which virsh sees there too), then runs virsh args.
func (d *Daemon) virshWithFile(ctx context.Context, file string, data []byte, args ...string) (string, error) {
	if err := os.WriteFile(filepath.Join(d.state, "run", file), data, 0o644); err != nil {
		return "", err
	}
	return d.virsh(ctx, nil, args...)
}

func (d *Daemon) virsh(ctx context.Context, mounts []trixietools.Mount, args ...string) (string, error) {
	select {
	case err := <-d.exit:
		d.exit <- err
		return "", fmt.Errorf("libvirtd exited (%v): %s", err, debroot.Tail(d.log, 20))
	default:
	}
	mounts = append([]trixietools.Mount{{Source: filepath.Join(d.state, "run"), Target: "run"}}, mounts...)
	out, err := d.root.Run(ctx, mounts, "virsh", append([]string{"-q", "-c", "qemu:///system"}, args...)...)
	if err != nil {
		return out, fmt.Errorf("virsh %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

// Close stops the daemon (SIGTERM, then SIGKILL after 10 s).
func (d *Daemon) Close() error {
	if d.cmd.Process == nil {
		return nil
	}
	_ = d.cmd.Process.Signal(os.Interrupt)
	select {
	case <-d.exit:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exit
	}
	return nil
}

// LogTail is the end of the daemon's own log, for a failing test's message.
func (d *Daemon) LogTail() string { return debroot.Tail(d.log, 20) }

// ValidateSchema runs virt-xml-validate (libvirt's RNG schema for <domain>) on domainXML. The error
// carries the validator's own words.
func ValidateSchema(ctx context.Context, root trixietools.Root, domainXML []byte) error {
	dir, err := os.MkdirTemp("", "libvirtcheck-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "domain.xml"), domainXML, 0o644); err != nil {
		return err
	}
	_, err = root.Run(ctx, []trixietools.Mount{{Source: dir, Target: "mnt"}}, "virt-xml-validate", "/mnt/domain.xml", "domain")
	if err != nil {
		return errors.New(strings.TrimSpace(err.Error()))
	}
	return nil
}
