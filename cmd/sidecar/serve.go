package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/hooks"
)

// serve wires the hook server and runs it until ctx is cancelled (a signal) or Shutdown is called.
func serve(ctx context.Context, cfg config, stderr io.Writer) error {
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	srv, err := hooks.New(hooks.Config{
		SocketDir:  cfg.socketDir,
		SocketName: cfg.socketName,
		Name:       "sriov-udn-binding",
		Handler:    hooks.PassThrough{},
		Logger:     logger,
	})
	if err != nil {
		return err
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	logger.Info("started", "version", version, "binding", cfg.bindingName, "socket", srv.Path())
	stopOnSignal := context.AfterFunc(ctx, func() {
		logger.Info("signal received, stopping")
		srv.Stop()
	})
	defer stopOnSignal()
	return srv.Serve()
}
