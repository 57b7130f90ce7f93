package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/binding"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/hooks"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// serve wires watcher, binding and hook server, and runs until ctx is cancelled (a signal) or
// virt-launcher calls Shutdown. Start-up never waits for DownwardAPI data.
func serve(ctx context.Context, cfg config, stderr io.Writer) (err error) {
	logger := newLogger(stderr, cfg.logLevel)
	// Once logging began every line is JSON, the fatal one too.
	defer func() {
		if err != nil {
			logger.Error("stopped on error", "error", err.Error())
		}
	}()

	watcher, err := binding.Watch(binding.Sources{DeviceInfoFile: cfg.deviceInfoFile, PodInfoDir: cfg.podInfoDir}, logger)
	if err != nil {
		return err
	}
	defer watcher.Close()

	bnd, err := binding.New(binding.Config{
		Options:     model.Options{BindingName: cfg.bindingName, PodIP: cfg.podIP},
		WaitTimeout: cfg.waitTimeout,
		Snapshots:   watcher,
		Cache:       binding.CacheDir(cfg.ifaceCacheDir, logger),
		Logger:      logger,
	})
	if err != nil {
		return err
	}
	// One request budget for both sockets: it bounds what the process holds (pkg/hooks budget.go).
	budget := hooks.NewBudget(hooks.DefaultLimits(), logger)
	srv, err := hooks.New(hooks.Config{
		SocketDir:  cfg.socketDir,
		SocketName: cfg.socketName,
		Name:       "sriov-udn-binding",
		Handler:    bnd,
		Logger:     logger,
		Budget:     budget,
	})
	if err != nil {
		return err
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	plugin, err := listenPlugin(cfg, bnd, budget, logger)
	if err != nil {
		srv.Stop() // Serve then returns at once and removes the hook socket
		return errors.Join(err, srv.Serve())
	}
	logger.Info("started", "version", version, "binding", cfg.bindingName, "bindingSource", cfg.bindingNameSource, "socket", srv.Path())
	if plugin != nil {
		logger.Info("serving the Plugin API domain hook", "socket", plugin.Path(), "wait", pluginWait(cfg))
	}
	if cfg.kubevirtBindingName != "" && cfg.kubevirtBindingName != cfg.bindingName {
		// KubeVirt started this sidecar for its binding; interfaces bound to it will pass through untouched.
		logger.Warn("binding name differs from the one KubeVirt set", "binding", cfg.bindingName, "bindingSource", cfg.bindingNameSource,
			"kubevirtBinding", cfg.kubevirtBindingName, "env", kubevirtBindingNameEnv)
	}

	refreshCtx, stopRefresh := context.WithCancel(ctx)
	var refresher sync.WaitGroup
	refresher.Go(func() { bnd.RefreshCache(refreshCtx) })
	defer func() {
		stopRefresh()
		refresher.Wait()
	}()

	stopOnSignal := context.AfterFunc(ctx, func() {
		logger.Info("signal received, stopping")
		srv.Stop()
		if plugin != nil {
			plugin.Stop()
		}
	})
	defer stopOnSignal()
	return serveBoth(srv, plugin)
}

// listenPlugin starts listening for KubeVirt's Plugin API domain hook (VEP-190) when --plugin-socket is
// set, and returns nil when it is not. Its wait is the shorter of --wait-timeout and the Plugin API's
// budget (hooks.DefaultPluginWait, under virt-launcher's 30 s call timeout).
func listenPlugin(cfg config, mutator hooks.DomainMutator, budget *hooks.Budget, logger *slog.Logger) (*hooks.Server, error) {
	if cfg.pluginSocket == "" {
		return nil, nil
	}
	srv, err := hooks.NewPlugin(hooks.PluginConfig{
		SocketPath: cfg.pluginSocket,
		Mutator:    mutator,
		Wait:       pluginWait(cfg),
		Logger:     logger,
		Budget:     budget,
	})
	if err != nil {
		return nil, err
	}
	if err := srv.Listen(); err != nil {
		return nil, err
	}
	return srv, nil
}

// serveBoth serves the hook server and, when there is one, the plugin server, until either stops: a
// Shutdown from virt-launcher (hook protocol) or a signal ends both, and so does a failure of either.
func serveBoth(hook, plugin *hooks.Server) error {
	if plugin == nil {
		return hook.Serve()
	}
	pluginDone := make(chan error, 1)
	go func() {
		err := plugin.Serve()
		hook.Stop()
		pluginDone <- err
	}()
	err := hook.Serve()
	plugin.Stop()
	return errors.Join(err, <-pluginDone)
}

// pluginWait is the longest a plugin call waits for data.
func pluginWait(cfg config) time.Duration { return min(cfg.waitTimeout, hooks.DefaultPluginWait) }

// Log lines stay short whatever the input: a VMI with hundreds of interfaces must not produce a 100 KB
// line. The logger does it for every package, so pkg/binding and pkg/hooks log errors and name lists as
// they are: a list is cut to its first few names (the caller logs its length beside it), an error's text
// to maxLoggedError bytes. The full error still goes to virt-launcher in the gRPC status.
const (
	maxLoggedNames = 8
	maxLoggedError = 1024
)

// newLogger is the sidecar's logger: one JSON line per event on w, values bounded (boundLogValue).
func newLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: boundLogValue}))
}

// boundLogValue cuts an error value and a list of names; other values (a panic's stack among them) pass.
func boundLogValue(_ []string, a slog.Attr) slog.Attr {
	switch v := a.Value.Any().(type) {
	case error:
		a.Value = slog.StringValue(boundedError(v))
	case []string:
		a.Value = slog.AnyValue(firstNames(v))
	}
	return a
}

// firstNames returns at most maxLoggedNames of names.
func firstNames(names []string) []string { return names[:min(len(names), maxLoggedNames)] }

// boundedError is err's text cut to maxLoggedError bytes (on a rune boundary), saying how long it was.
// An Error method that panics (a nil pointer in a non-nil interface) gives a placeholder: a log line must
// never take the process down.
func boundedError(err error) (text string) {
	defer func() {
		if r := recover(); r != nil {
			text = fmt.Sprintf("<error text unavailable: %v>", r)
		}
	}()
	s := err.Error()
	if len(s) <= maxLoggedError {
		return s
	}
	cut := maxLoggedError
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s...(%d bytes in all)", s[:cut], len(s))
}
