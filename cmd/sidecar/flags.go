package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

var errHelp = errors.New("help requested")

// minWaitTimeout is the shortest --wait-timeout accepted: kubelet refreshes a DownwardAPI volume
// seconds after a change at best, so a shorter wait only turns late data into failed VM starts.
const minWaitTimeout = time.Second

// config is everything the flags (or their environment twins) say.
type config struct {
	socketDir      string
	socketName     string
	bindingName    string
	deviceInfoFile string
	podInfoDir     string
	ifaceCacheDir  string
	podIP          string
	pluginSocket   string
	waitTimeout    time.Duration
	logLevel       slog.Level
	showVersion    bool
	// bindingNameSource says where bindingName came from: "--binding-name", "BINDING_NAME",
	// "NETWORK_BINDING_PLUGIN_NAME" or "default".
	bindingNameSource string
	// kubevirtBindingName is NETWORK_BINDING_PLUGIN_NAME ("" when unset): the name KubeVirt v1.9+
	// registered this sidecar under. serve warns when the binding name in use differs from it.
	kubevirtBindingName string
}

// kubevirtBindingNameEnv is set by virt-controller v1.9+ on every binding-plugin sidecar to the
// binding's name in the KubeVirt CR (kubevirt v1.9.0 pkg/hooks/hooks.go NetworkBindingPluginNameEnvVar,
// pkg/virt-controller/services/template.go newSidecarContainerRenderer). v1.8 sets nothing.
const kubevirtBindingNameEnv = "NETWORK_BINDING_PLUGIN_NAME"

// parseFlags reads flags; each flag's default comes from its environment twin when that is set,
// so a flag on the command line wins over the environment, which wins over the built-in default.
func parseFlags(args []string, lookupEnv func(string) (string, bool), helpOut io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("sriov-udn-binding", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	str := func(p *string, name, env, def, usage string) {
		if v, ok := lookupEnv(env); ok {
			def = v
		}
		fs.StringVar(p, name, def, fmt.Sprintf("%s (env %s)", usage, env))
	}
	str(&cfg.socketDir, "socket-dir", "SOCKET_DIR", "/var/run/kubevirt-hooks", "directory of the hook socket (KubeVirt's shared hooks mount)")
	str(&cfg.socketName, "socket-name", "SOCKET_NAME", "sriov-udn-binding.sock", "hook socket file name, unique among the pod's sidecars")
	// The binding name's default is the one KubeVirt says, else ours; BINDING_NAME and the flag
	// override it like any twin and flag.
	bindingDef, bindingSource := "sriov-udn", "default"
	if v, ok := lookupEnv(kubevirtBindingNameEnv); ok && strings.TrimSpace(v) != "" {
		bindingDef, bindingSource, cfg.kubevirtBindingName = v, kubevirtBindingNameEnv, v
	}
	if _, ok := lookupEnv("BINDING_NAME"); ok {
		bindingSource = "BINDING_NAME"
	}
	str(&cfg.bindingName, "binding-name", "BINDING_NAME", bindingDef,
		"binding plugin name in the KubeVirt CR (spec.configuration.network.binding); env "+kubevirtBindingNameEnv+", set by KubeVirt >= v1.9, is the default when set")
	str(&cfg.deviceInfoFile, "device-info-file", "DEVICE_INFO_FILE", "/etc/podinfo/network-info", "device-info DownwardAPI file (kubevirt.io/network-info)")
	str(&cfg.podInfoDir, "pod-info-dir", "POD_INFO_DIR", "/var/run/kubevirt-private/downwardapi/podinfo", "pod-info DownwardAPI directory (labels, annotations)")
	str(&cfg.ifaceCacheDir, "iface-cache-dir", "IFACE_CACHE_DIR", "/var/run/kubevirt-hooks/ifacecache", "where PodIfaceCacheData files are written (<dir>/<vmi-uid>/<iface>)")
	str(&cfg.pluginSocket, "plugin-socket", "PLUGIN_SOCKET", "", "also serve KubeVirt's Plugin API domain hook (v1.9+, gate Plugins) on this socket: /var/run/kubevirt-plugin/<plugin>/<name>.sock; empty: off")
	str(&cfg.podIP, "pod-ip", "MY_POD_IP", "", "the pod's IP (status.podIP): decides the primary IP family; empty: the pod-networks default entry, else IPv4")

	waitDef := 45 * time.Second
	var waitEnvErr error
	if v, ok := lookupEnv("WAIT_TIMEOUT"); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			waitEnvErr = fmt.Errorf("invalid WAIT_TIMEOUT %q: %w", v, err)
		} else {
			waitDef = d
		}
	}
	fs.DurationVar(&cfg.waitTimeout, "wait-timeout", waitDef, "how long a hook waits for DownwardAPI data (env WAIT_TIMEOUT); keep under the 1 min hook deadline")

	levelDef, levelSource := "info", "--log-level"
	if v, ok := lookupEnv("LOG_LEVEL"); ok {
		levelDef, levelSource = v, "LOG_LEVEL"
	}
	var level string
	fs.StringVar(&level, "log-level", levelDef, "log level: debug, info, warn, error (env LOG_LEVEL)")
	fs.BoolVar(&cfg.showVersion, "version", false, "print the version and exit")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(helpOut)
			fmt.Fprintf(helpOut, "Usage: sriov-udn-binding [flags]\n       sriov-udn-binding render --pod FILE|--pod-info-dir DIR --vmi FILE [--format text|json]\n"+
				"       sriov-udn-binding webhook --tls-cert-file FILE --tls-key-file FILE [flags]\n\nFlags:\n")
			fs.PrintDefaults()
			return cfg, errHelp
		}
		return cfg, err
	}
	// A flag on the command line wins over its environment twin, even a malformed one.
	set := visited(fs)
	if waitEnvErr != nil && !set["wait-timeout"] {
		return cfg, waitEnvErr
	}
	if set["log-level"] {
		levelSource = "--log-level"
	}
	if set["binding-name"] {
		bindingSource = "--binding-name"
	}
	cfg.bindingNameSource = bindingSource
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := cfg.logLevel.UnmarshalText([]byte(level)); err != nil {
		return cfg, fmt.Errorf("invalid %s %q: want debug, info, warn or error", levelSource, level)
	}
	if cfg.waitTimeout < minWaitTimeout || cfg.waitTimeout >= time.Minute {
		return cfg, fmt.Errorf("invalid --wait-timeout %s: must be at least %s and below virt-launcher's 1m hook deadline", cfg.waitTimeout, minWaitTimeout)
	}
	// An empty cache dir would put the cache in the working directory: refused rather than guessed.
	for name, v := range map[string]string{"--socket-dir": cfg.socketDir, "--socket-name": cfg.socketName, "--binding-name": cfg.bindingName, "--iface-cache-dir": cfg.ifaceCacheDir} {
		if strings.TrimSpace(v) == "" {
			return cfg, fmt.Errorf("invalid %s: must not be empty", name)
		}
	}
	return cfg, nil
}

// visited names the flags given on the command line.
func visited(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
