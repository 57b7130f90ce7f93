package downwardapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fsnotify/fsnotify"
)

// Config says where the DownwardAPI volumes are mounted. An empty path means "not configured".
type Config struct {
	DeviceInfoFile string       // e.g. /etc/podinfo/network-info ("" = not configured)
	PodInfoDir     string       // e.g. /var/run/kubevirt-private/downwardapi/podinfo ("" = not configured)
	Logger         *slog.Logger // nil = discard
}

// eventBuffer lets fsnotify hand over a whole kubelet swap (about six events) without a round trip per
// event, so one swap usually costs one re-read.
const eventBuffer = 64

// source is one watched directory and the files read from it. Owned by the watcher goroutine.
type source struct {
	name       string   // "device-info" or "pod-info", for logs
	dir        string   // absolute directory the files live in
	files      []string // base names
	watchPoint string   // dir itself, or its nearest existing ancestor while dir does not exist
	last       []fileState
	parse      func([]fileState) // stores the parsed content of files in the Watcher
}

// published pairs a snapshot with the channel closed when it is superseded, so a waiter that loaded
// one can never miss the next.
type published struct {
	snap    *Snapshot
	changed chan struct{}
}

// Watcher keeps an immutable Snapshot of the DownwardAPI volumes current and wakes waiters on change.
type Watcher struct {
	log     *slog.Logger
	fsw     *fsnotify.Watcher // nil when nothing is configured
	sources []*source
	watched map[string]bool // paths added to fsw; owned by the goroutine after NewWatcher returns

	// Parsed content of each source, owned by the goroutine after NewWatcher returns.
	device        *NetworkInfo
	deviceProblem error
	pod           *Snapshot // the pod-info part: labels, annotations and their problems

	state     atomic.Pointer[published]
	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
}

// NewWatcher reads the configured volumes once, publishes the first Snapshot (Generation 1) and starts
// watching. It never waits for data: absent directories and files are normal (the volume may not be
// mounted, or not projected yet). It fails only when fsnotify cannot be set up.
func NewWatcher(cfg Config) (*Watcher, error) {
	w := &Watcher{
		log:     cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		watched: map[string]bool{},
		pod:     &Snapshot{},
		closed:  make(chan struct{}),
		done:    make(chan struct{}),
	}
	if cfg.DeviceInfoFile != "" {
		p, err := filepath.Abs(cfg.DeviceInfoFile)
		if err != nil {
			return nil, fmt.Errorf("device-info file %q: %w", cfg.DeviceInfoFile, err)
		}
		w.sources = append(w.sources, &source{name: "device-info", dir: filepath.Dir(p), files: []string{filepath.Base(p)},
			parse: func(st []fileState) { w.device, w.deviceProblem = parseDeviceInfo(p, st[0]) }})
	}
	if cfg.PodInfoDir != "" {
		p, err := filepath.Abs(cfg.PodInfoDir)
		if err != nil {
			return nil, fmt.Errorf("pod-info dir %q: %w", cfg.PodInfoDir, err)
		}
		w.sources = append(w.sources, &source{name: "pod-info", dir: p, files: []string{LabelsFile, AnnotationsFile},
			parse: func(st []fileState) { w.pod = parsePodInfo(p, st[0], st[1]) }})
	}
	if len(w.sources) == 0 {
		close(w.done)
		w.state.Store(&published{snap: &Snapshot{Generation: 1}, changed: make(chan struct{})})
		return w, nil
	}
	fsw, err := fsnotify.NewBufferedWatcher(eventBuffer)
	if err != nil {
		return nil, fmt.Errorf("creating fsnotify watcher: %w", err)
	}
	w.fsw = fsw
	// Watches first, then the read: a write after the read is guaranteed an event.
	for _, s := range w.sources {
		w.reconcile(s)
		w.read(s)
	}
	w.state.Store(&published{snap: w.build(1), changed: make(chan struct{})})
	w.logPublished(w.state.Load().snap)
	go w.run()
	return w, nil
}

// Snapshot returns the current snapshot; never nil. Callers must not modify it.
func (w *Watcher) Snapshot() *Snapshot {
	return w.state.Load().snap
}

// Wait returns as soon as need(snapshot) reports nothing missing. It is woken by each publish, never by
// a timer. When ctx ends (or the watcher closes) it returns the last snapshot and a *MissingError listing
// need(last snapshot) and the snapshot's parse problems.
func (w *Watcher) Wait(ctx context.Context, need func(*Snapshot) []Missing) (*Snapshot, error) {
	snap, err := w.await(ctx, func(s *Snapshot) bool { return len(need(s)) == 0 })
	if err == nil {
		return snap, nil
	}
	snap = w.Snapshot()
	if items := need(snap); len(items) > 0 {
		return snap, &MissingError{Items: items, Problems: snap.Problems, Err: err}
	}
	return snap, nil
}

// Next returns the first snapshot whose Generation is greater than after: a background loop passes the
// Generation it last handled. It returns ctx.Err() or ErrClosed when it cannot.
func (w *Watcher) Next(ctx context.Context, after uint64) (*Snapshot, error) {
	return w.await(ctx, func(s *Snapshot) bool { return s.Generation > after })
}

// await returns the first published snapshot ready accepts, or ctx.Err() or ErrClosed.
func (w *Watcher) await(ctx context.Context, ready func(*Snapshot) bool) (*Snapshot, error) {
	for {
		st := w.state.Load()
		if ready(st.snap) {
			return st.snap, nil
		}
		select {
		case <-st.changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-w.closed:
			return nil, ErrClosed
		}
	}
}

// Close stops watching and unblocks every Wait and Next with ErrClosed. It is idempotent.
func (w *Watcher) Close() error {
	w.closeOnce.Do(func() {
		close(w.closed)
		if w.fsw == nil {
			return
		}
		if err := w.fsw.Close(); err != nil {
			w.closeErr = fmt.Errorf("closing fsnotify watcher: %w", err)
			return
		}
		<-w.done
	})
	return w.closeErr
}

// run is the only goroutine that touches sources, watches and parsed state after NewWatcher.
func (w *Watcher) run() {
	defer close(w.done)
	for {
		select {
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			dirty := w.route(ev)
			// Take what is already queued so a whole swap costs one re-read (this goroutine is the only
			// reader, so a queued event is there to receive).
			for len(w.fsw.Events) > 0 {
				dirty = append(dirty, w.route(<-w.fsw.Events)...)
			}
			w.refresh(dirty)
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			w.log.Warn("downwardapi: fsnotify error", "error", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				// Events were dropped: re-establish every watch and re-read everything.
				for _, s := range w.sources {
					w.reconcile(s)
				}
				w.refresh(w.sources)
			}
		}
	}
}

// route returns the sources an event may have changed, moving watch points as directories appear or
// disappear.
func (w *Watcher) route(ev fsnotify.Event) []*source {
	var dirty []*source
	name := filepath.Clean(ev.Name)
	for _, s := range w.sources {
		switch {
		case name == s.watchPoint && ev.Has(fsnotify.Remove|fsnotify.Rename):
			// The watched directory went away (volume torn down, directory removed or renamed); the kernel
			// dropped its watch. Fall back to the nearest existing ancestor.
			w.reconcile(s)
			dirty = append(dirty, s)
		case s.watchPoint != s.dir:
			// Watching an ancestor: move down when a component of the path appears, or when its mode
			// changes (Chmod): a directory we could not watch or read may have become readable.
			if ev.Has(fsnotify.Create|fsnotify.Rename|fsnotify.Chmod) && within(s.dir, name) {
				w.reconcile(s)
				dirty = append(dirty, s)
			}
		case name == s.dir && ev.Has(fsnotify.Chmod):
			// The directory's own mode changed: files unreadable through it may be readable now.
			dirty = append(dirty, s)
		case filepath.Dir(name) == s.dir:
			// kubelet renames ..data into place (Create, or Write on some systems: jimmidyson/configmap-reload#190)
			// and creates the user-visible symlinks on the first update; a plain directory gets Create/Write/Remove
			// of the file, and Chmod when its mode is fixed in place. A re-read publishes only changed content.
			base := filepath.Base(name)
			if base == dataLink || slices.Contains(s.files, base) {
				dirty = append(dirty, s)
			}
		}
	}
	return dirty
}

// within reports whether path is p or lies below it.
func within(path, p string) bool {
	return path == p || strings.HasPrefix(path, strings.TrimSuffix(p, "/")+"/")
}

// reconcile watches s.dir, or while it does not exist, its nearest existing ancestor, whose Create event for
// the next path component brings the watch back down. It then tries to descend again at once: a component
// may have appeared between the failed Add and the ancestor's watch (that Create was never seen).
func (w *Watcher) reconcile(s *source) {
	p := s.dir
	for w.fsw.Add(p) != nil {
		parent := filepath.Dir(p)
		if parent == p {
			w.log.Warn("downwardapi: nothing watchable on path", "source", s.name, "dir", s.dir)
			s.watchPoint = ""
			w.dropUnneededWatches()
			return
		}
		p = parent
	}
	w.watched[p] = true
	for p != s.dir {
		next := filepath.Join(p, strings.SplitN(strings.TrimPrefix(s.dir, strings.TrimSuffix(p, "/")+"/"), "/", 2)[0])
		if w.fsw.Add(next) != nil {
			break
		}
		w.watched[next] = true
		p = next
	}
	if p != s.watchPoint {
		w.log.Info("downwardapi: watching", "source", s.name, "dir", s.dir, "watchPoint", p)
	}
	s.watchPoint = p
	w.dropUnneededWatches()
}

// dropUnneededWatches removes watches no source relies on any more (ancestors we moved below).
func (w *Watcher) dropUnneededWatches() {
	for p := range w.watched {
		if !slices.ContainsFunc(w.sources, func(s *source) bool { return s.watchPoint == p }) {
			// The kernel may already have dropped it (directory removed): nothing to undo then.
			_ = w.fsw.Remove(p)
			delete(w.watched, p)
		}
	}
}

// refresh re-reads the dirty sources and publishes a new snapshot only if some content changed.
func (w *Watcher) refresh(dirty []*source) {
	changed := false
	for _, s := range w.sources {
		if slices.Contains(dirty, s) && w.read(s) {
			changed = true
		}
	}
	if !changed {
		return
	}
	old := w.state.Load()
	next := &published{snap: w.build(old.snap.Generation + 1), changed: make(chan struct{})}
	w.state.Store(next)
	close(old.changed)
	w.logPublished(next.snap)
}

// read re-reads one source and re-parses it when its bytes changed; it reports whether they did.
func (w *Watcher) read(s *source) bool {
	states := readFiles(s.dir, s.files)
	if s.last != nil && slices.EqualFunc(states, s.last, fileState.equal) {
		return false
	}
	s.last = states
	s.parse(states)
	return true
}

// parseDeviceInfo parses the device-info file; an absent one (no data) is no problem.
func parseDeviceInfo(path string, st fileState) (*NetworkInfo, error) {
	if st.err != nil {
		return nil, fmt.Errorf("device-info file: %w", st.err)
	}
	info, err := ParseNetworkInfo(path, st.data)
	if err != nil {
		return nil, fmt.Errorf("device-info file: %w", err)
	}
	return info, nil
}

// parsePodInfo parses the pod-info files into the pod-info part of a Snapshot.
func parsePodInfo(dir string, labels, annotations fileState) *Snapshot {
	s := &Snapshot{PodInfo: labels.present || annotations.present}
	parse := func(name string, st fileState) map[string]string {
		if !st.present {
			return nil
		}
		var m map[string]string
		err := st.err
		if err == nil {
			m, err = ParseFormatMap(filepath.Join(dir, name), st.data)
		}
		if err != nil {
			s.Problems = append(s.Problems, fmt.Errorf("pod-info file: %w", err))
		}
		return m
	}
	s.Labels = parse(LabelsFile, labels)
	s.Annotations = parse(AnnotationsFile, annotations)
	s.parseAnnotations("pod-info file " + filepath.Join(dir, AnnotationsFile))
	return s
}

// build assembles the next Snapshot from the parsed parts of each source.
func (w *Watcher) build(gen uint64) *Snapshot {
	s := *w.pod
	s.Generation, s.DeviceInfo, s.Problems = gen, w.device, nil
	if w.deviceProblem != nil {
		s.Problems = append(s.Problems, w.deviceProblem)
	}
	s.Problems = append(s.Problems, w.pod.Problems...)
	return &s
}

func (w *Watcher) logPublished(s *Snapshot) {
	w.log.Info("downwardapi: snapshot published", "generation", s.Generation, "deviceInfo", s.DeviceInfo != nil,
		"podInfo", s.PodInfo, "annotations", len(s.Annotations), "problems", len(s.Problems))
	for _, p := range s.Problems {
		w.log.Warn("downwardapi: input problem", "generation", s.Generation, "error", p)
	}
}
