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
	waitTimeout    time.Duration
	logLevel       slog.Level
	showVersion    bool
}

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
	str(&cfg.bindingName, "binding-name", "BINDING_NAME", "sriov-udn", "binding plugin name in the KubeVirt CR (spec.configuration.network.binding)")
	str(&cfg.deviceInfoFile, "device-info-file", "DEVICE_INFO_FILE", "/etc/podinfo/network-info", "device-info DownwardAPI file (kubevirt.io/network-info)")
	str(&cfg.podInfoDir, "pod-info-dir", "POD_INFO_DIR", "/var/run/kubevirt-private/downwardapi/podinfo", "pod-info DownwardAPI directory (labels, annotations)")
	str(&cfg.ifaceCacheDir, "iface-cache-dir", "IFACE_CACHE_DIR", "/var/run/kubevirt-hooks/ifacecache", "where PodIfaceCacheData files are written (<dir>/<vmi-uid>/<iface>)")
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
			fmt.Fprintf(helpOut, "Usage: sriov-udn-binding [flags]\n       sriov-udn-binding render --pod FILE|--pod-info-dir DIR --vmi FILE [--format text|json]\n\nFlags:\n")
			fs.PrintDefaults()
			return cfg, errHelp
		}
		return cfg, err
	}
	// A flag on the command line wins over its environment twin, even a malformed one.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if waitEnvErr != nil && !set["wait-timeout"] {
		return cfg, waitEnvErr
	}
	if set["log-level"] {
		levelSource = "--log-level"
	}
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
