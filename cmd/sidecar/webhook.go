package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/admission"
)

const webhookUsage = `Usage: sriov-udn-binding webhook --tls-cert-file FILE --tls-key-file FILE [flags]

Serves the pod-info mutating admission webhook (docs/pod-info-webhook.md): on a server that does not serve
MutatingAdmissionPolicy, it gives every virt-launcher pod that runs the sriov-udn-binding sidecar the
sriov-udn-podinfo downwardAPI volume and mounts it into that sidecar, as manifests/podinfo-policy does.
POST /mutate takes an admission.k8s.io/v1 AdmissionReview; GET /healthz answers ok. Stops on SIGTERM.

Flags:
`

// webhookConfig is what the webhook subcommand's flags say.
type webhookConfig struct {
	listen, certFile, keyFile string
	rule                      admission.Rule
	logLevel                  slog.Level
}

func parseWebhookFlags(args []string, helpOut io.Writer) (webhookConfig, error) {
	var cfg webhookConfig
	fs := flag.NewFlagSet("sriov-udn-binding webhook", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.listen, "listen", ":8443", "address to serve HTTPS on")
	fs.StringVar(&cfg.certFile, "tls-cert-file", "", "serving certificate (PEM, with its chain); re-read when it changes")
	fs.StringVar(&cfg.keyFile, "tls-key-file", "", "the certificate's private key (PEM); re-read when it changes")
	fs.StringVar(&cfg.rule.ImageSubstring, "image-substring", admission.ImageMarker,
		"finds our hook sidecars by this substring of their image name; change it with the manifests' contains('...') when the image is renamed")
	var level string
	fs.StringVar(&level, "log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(helpOut, webhookUsage)
			fs.SetOutput(helpOut)
			fs.PrintDefaults()
			return cfg, errHelp
		}
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if cfg.certFile == "" || cfg.keyFile == "" {
		return cfg, errors.New("--tls-cert-file and --tls-key-file are required: kube-apiserver calls webhooks over HTTPS only")
	}
	if strings.TrimSpace(cfg.rule.ImageSubstring) == "" {
		return cfg, errors.New("invalid --image-substring: must not be empty (it would match every hook sidecar, KubeVirt's own included)")
	}
	if err := cfg.logLevel.UnmarshalText([]byte(level)); err != nil {
		return cfg, fmt.Errorf("invalid --log-level %q: want debug, info, warn or error", level)
	}
	return cfg, nil
}

// runWebhook is `sriov-udn-binding webhook`: exit 0 on a clean stop, 1 on a failure, 2 on bad usage.
func runWebhook(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseWebhookFlags(args, stdout)
	if errors.Is(err, errHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "sriov-udn-binding webhook: %v\n", err)
		return 2
	}
	logger := newLogger(stderr, cfg.logLevel)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serveWebhook(ctx, cfg, logger); err != nil {
		logger.Error("webhook failed", "error", err)
		return 1
	}
	return 0
}

// shutdownGrace bounds how long a stopping webhook waits for reviews in flight; kube-apiserver's own timeout
// for a call (the configuration's timeoutSeconds) is shorter.
const shutdownGrace = 15 * time.Second

// serveWebhook listens on --listen and serves until ctx ends, then stops gracefully.
func serveWebhook(ctx context.Context, cfg webhookConfig, logger *slog.Logger) error {
	certs := &certReloader{certFile: cfg.certFile, keyFile: cfg.keyFile, log: logger}
	if _, err := certs.GetCertificate(nil); err != nil {
		return err // before listening: a probe must not see a server that cannot serve
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen on --listen %q: %w", cfg.listen, err)
	}
	return serveWebhookOn(ctx, ln, certs, cfg.rule, logger)
}

// serveWebhookOn serves on ln (which it closes) until ctx ends, then stops gracefully.
func serveWebhookOn(ctx context.Context, ln net.Listener, certs *certReloader, rule admission.Rule, logger *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("/mutate", admission.NewHandler(logger, rule))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	srv := &http.Server{
		Handler: mux,
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: certs.GetCertificate,
		},
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	logger.Info("webhook serving", "address", ln.Addr().String(), "imageSubstring", rule.ImageSubstring, "version", version)
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-served:
		return fmt.Errorf("serve HTTPS on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("stop serving on %s: %w", ln.Addr(), err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve HTTPS on %s: %w", ln.Addr(), err)
	}
	logger.Info("webhook stopped", "address", ln.Addr().String())
	return nil
}

// certReloader serves the key pair in certFile and keyFile, re-read when either file's modification time or
// size changes: service-ca and cert-manager rotate the Secret, and kubelet swaps the mounted files
// (pkg/volume/util/atomic_writer.go), so a stat that follows the symlink sees the new ones. A pair that does
// not load (a rotation seen half-way) keeps the last good one serving.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu    sync.Mutex
	cert  *tls.Certificate
	stamp [2]fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
}

func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var stamp [2]fileStamp
	for i, f := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return r.keep(fmt.Errorf("stat %s: %w", f, err))
		}
		stamp[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
	}
	if r.cert != nil && stamp == r.stamp {
		return r.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return r.keep(fmt.Errorf("load the key pair %s, %s: %w", r.certFile, r.keyFile, err))
	}
	r.cert, r.stamp = &cert, stamp
	r.log.Info("serving certificate loaded", "certFile", r.certFile, "notAfter", cert.Leaf.NotAfter, "dnsNames", cert.Leaf.DNSNames)
	return r.cert, nil
}

// keep returns the last good certificate when there is one (and logs why it was not replaced), else err.
func (r *certReloader) keep(err error) (*tls.Certificate, error) {
	if r.cert == nil {
		return nil, err
	}
	r.log.Warn("serving certificate not reloaded, the previous one is served", "error", err)
	return r.cert, nil
}
