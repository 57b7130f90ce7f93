package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

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
