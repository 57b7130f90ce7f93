package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// CNI spec 1.0.0 well-known error codes (https://www.cni.dev/docs/spec/#error); 100+ are this plugin's own.
const (
	codeIncompatibleVersion = 1
	codeUnknownContainer    = 3
	codeInvalidEnv          = 4
	codeIOError             = 5
	codeDecode              = 6
	codeInvalidConfig       = 7
	codeAPIServer           = 100 // reading or patching the pod, reading a NAD
	codeDelegate            = 101 // a delegated plugin (bridge, host-local) failed
	codeDevice              = 102 // the TAP device standing in for a VF
	codeInternal            = 999
)

// cniError is the error JSON the spec prints on stdout with a non-zero exit.
type cniError struct {
	CNIVersion string `json:"cniVersion"`
	Code       uint   `json:"code"`
	Msg        string `json:"msg"`
	Details    string `json:"details,omitempty"`
}

// codedError carries a CNI error code through %w wrapping.
type codedError struct {
	code uint
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

func withCode(code uint, err error) error {
	if err == nil {
		return nil
	}
	return &codedError{code: code, err: err}
}

// errorCode finds the CNI error code of err (codeInternal when none was attached).
func errorCode(err error) uint {
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	var cfg *configError
	if errors.As(err, &cfg) {
		return cfg.code
	}
	return codeInternal
}

// Env is the CNI_* environment of one invocation.
type Env struct {
	Command     string
	ContainerID string
	Netns       string
	IfName      string
	Args        string
	Path        string
}

func envFrom(getenv func(string) string) Env {
	return Env{
		Command:     getenv("CNI_COMMAND"),
		ContainerID: getenv("CNI_CONTAINERID"),
		Netns:       getenv("CNI_NETNS"),
		IfName:      getenv("CNI_IFNAME"),
		Args:        getenv("CNI_ARGS"),
		Path:        getenv("CNI_PATH"),
	}
}

// containerIDRe is the spec's rule for CNI_CONTAINERID: alphanumeric, then alphanumeric, '_', '.', '-'.
var containerIDRe = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`)

// check validates the variables the command needs (spec: "Parameters"); netns is needed by ADD and CHECK.
func (e Env) check(needNetns bool) error {
	bad := func(format string, a ...any) error { return withCode(codeInvalidEnv, fmt.Errorf(format, a...)) }
	if e.ContainerID == "" || len(e.ContainerID) > 256 || !containerIDRe.MatchString(e.ContainerID) {
		return bad("CNI_CONTAINERID %s is not a valid container ID", netval.Quote(e.ContainerID))
	}
	if err := checkIfName(e.IfName); err != nil {
		return bad("CNI_IFNAME: %w", err)
	}
	if needNetns && e.Netns == "" {
		return bad("CNI_NETNS is empty for CNI_COMMAND %s", e.Command)
	}
	return nil
}

// arg returns one K=V pair of CNI_ARGS ("IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=pod;...").
func (e Env) arg(key string) string {
	for _, kv := range strings.Split(e.Args, ";") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k == key {
			return v
		}
	}
	return ""
}

// podRef returns the pod's namespace and name from CNI_ARGS, as kubelet's runtimes pass them.
func (e Env) podRef() (string, string, error) {
	ns, name := e.arg("K8S_POD_NAMESPACE"), e.arg("K8S_POD_NAME")
	if ns == "" || name == "" {
		return "", "", withCode(codeInvalidEnv, fmt.Errorf("CNI_ARGS %s lacks K8S_POD_NAMESPACE or K8S_POD_NAME", netval.Quote(e.Args)))
	}
	return ns, name, nil
}

// Result is a CNI 1.0.0 result (https://www.cni.dev/docs/spec/#add-success), the fields this plugin reads.
type Result struct {
	CNIVersion string        `json:"cniVersion"`
	Interfaces []ResultIface `json:"interfaces,omitempty"`
	IPs        []ResultIP    `json:"ips,omitempty"`
	Routes     []ResultRoute `json:"routes,omitempty"`
	DNS        ResultDNS     `json:"dns"`
}

// ResultIface is one entry of a result's interfaces.
type ResultIface struct {
	Name    string `json:"name"`
	Mac     string `json:"mac,omitempty"`
	Sandbox string `json:"sandbox,omitempty"`
}

// ResultIP is one entry of a result's ips: address is a CIDR, interface an index into interfaces.
type ResultIP struct {
	Interface *int   `json:"interface,omitempty"`
	Address   string `json:"address"`
	Gateway   string `json:"gateway,omitempty"`
}

// ResultRoute is one entry of a result's routes.
type ResultRoute struct {
	Dst string `json:"dst"`
	GW  string `json:"gw,omitempty"`
}

// ResultDNS is a result's dns.
type ResultDNS struct {
	Nameservers []string `json:"nameservers,omitempty"`
	Domain      string   `json:"domain,omitempty"`
	Search      []string `json:"search,omitempty"`
	Options     []string `json:"options,omitempty"`
}

// delegate runs one plugin binary (bridge, host-local) the way a runtime does: config on stdin, CNI_* in
// the environment, result or error JSON on stdout. It returns stdout on success.
func delegate(ctx context.Context, conf *Config, env Env, command, plugin, ifname string, netconf []byte) ([]byte, error) {
	path, err := findPlugin(conf.PluginDir, env.Path, plugin)
	if err != nil {
		return nil, withCode(codeDelegate, err)
	}
	cmd := exec.CommandContext(ctx, path)
	cmd.Stdin = bytes.NewReader(netconf)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cniPath := conf.PluginDir
	if env.Path != "" {
		cniPath += string(os.PathListSeparator) + env.Path
	}
	cmd.Env = append(withoutCNIEnv(os.Environ()),
		"CNI_COMMAND="+command, "CNI_CONTAINERID="+env.ContainerID, "CNI_NETNS="+env.Netns,
		"CNI_IFNAME="+ifname, "CNI_ARGS="+env.Args, "CNI_PATH="+cniPath)
	if err := cmd.Run(); err != nil {
		var ce cniError
		msg := strings.TrimSpace(stderr.String())
		if json.Unmarshal(stdout.Bytes(), &ce) == nil && ce.Msg != "" {
			msg = fmt.Sprintf("code %d: %s", ce.Code, ce.Msg)
			if ce.Details != "" {
				msg += " (" + ce.Details + ")"
			}
		}
		return nil, withCode(codeDelegate, fmt.Errorf("%s %s for %s (container %s): %w: %s", plugin, command, ifname, env.ContainerID, err, msg))
	}
	return stdout.Bytes(), nil
}

// findPlugin looks for a plugin binary in pluginDir first, then in CNI_PATH.
func findPlugin(pluginDir, cniPath, plugin string) (string, error) {
	dirs := append([]string{pluginDir}, filepath.SplitList(cniPath)...)
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, plugin)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("plugin %s: %w", plugin, err)
		}
	}
	return "", fmt.Errorf("plugin %s not found in %s", plugin, strings.Join(dirs, string(os.PathListSeparator)))
}

func withoutCNIEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "CNI_") {
			out = append(out, kv)
		}
	}
	return out
}

// parseResult decodes a delegate's result and checks it speaks our version.
func parseResult(plugin string, data []byte) (*Result, error) {
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, withCode(codeDelegate, fmt.Errorf("%s result %q: %w", plugin, truncate(data, 200), err))
	}
	if r.CNIVersion != cniVersion {
		return nil, withCode(codeDelegate, fmt.Errorf("%s result has cniVersion %s, want %s", plugin, netval.Quote(r.CNIVersion), cniVersion))
	}
	return &r, nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
