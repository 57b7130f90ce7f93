package main

import (
	"errors"
	"log/slog"
	"time"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/hooks"
)

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
