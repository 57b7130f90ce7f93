package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// readyTimeout bounds how long a sidecar may take to listen; far above any plausible start time.
const readyTimeout = 20 * time.Second

// Process is a sidecar started by StartProcess.
type Process struct {
	cmd    *exec.Cmd
	Socket string
	// Ready is the time from just before exec to the first accepted connection on Socket.
	Ready  time.Duration
	exited chan struct{}
	// Lines receives stderr lines when StartProcess was given withLines; dropped when full.
	Lines chan string
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// StartProcess execs bin and returns once socket accepts a connection. Readiness is detected by
// an inotify watch on the socket's directory (added before exec): on the socket's Create event the
// bench dials; should the dial land between bind and listen (Go's net.Listen does both in one
// call, a window of microseconds) it retries in a tight loop without sleeping. With withLines the
// sidecar's stderr lines are delivered on Lines; otherwise stderr goes to /dev/null so that no
// reader in the bench competes with the start. env is added to a PATH-only environment (ours runs with the
// image's settings, harness.ImageEnv; the peer with none, as KubeVirt's image sets none).
func StartProcess(bin string, args, env []string, socket string, withLines bool) (*Process, error) {
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", socket, err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("inotify for %s: %w", socket, err)
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(socket)); err != nil {
		return nil, fmt.Errorf("watch %s: %w", filepath.Dir(socket), err)
	}

	p := &Process{cmd: exec.Command(bin, args...), Socket: socket, exited: make(chan struct{})}
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var stderr io.ReadCloser
	if withLines {
		p.Lines = make(chan string, 4096)
		if stderr, err = p.cmd.StderrPipe(); err != nil {
			return nil, fmt.Errorf("stderr pipe of %s: %w", bin, err)
		}
	} else {
		devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
		}
		defer devNull.Close()
		p.cmd.Stderr = devNull
	}

	start := time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("exec %s: %w", bin, err)
	}
	if stderr != nil {
		go p.readLines(stderr)
	} else {
		go func() { _ = p.cmd.Wait(); close(p.exited) }()
	}

	timeout := time.NewTimer(readyTimeout)
	defer timeout.Stop()
	for {
		select {
		case ev := <-w.Events:
			if ev.Name != socket || !ev.Has(fsnotify.Create) {
				continue
			}
			if err := dialUntil(socket, p.exited); err != nil {
				p.Kill()
				return nil, err
			}
			p.Ready = time.Since(start)
			return p, nil
		case err := <-w.Errors:
			p.Kill()
			return nil, fmt.Errorf("inotify on %s: %w", filepath.Dir(socket), err)
		case <-p.exited:
			return nil, fmt.Errorf("%s exited before listening on %s: %v", bin, socket, p.cmd.ProcessState)
		case <-timeout.C:
			p.Kill()
			return nil, fmt.Errorf("%s did not listen on %s within %s", bin, socket, readyTimeout)
		}
	}
}

// dialUntil dials socket until it accepts, the process exits, or a second passes.
func dialUntil(socket string, exited <-chan struct{}) error {
	deadline := time.Now().Add(time.Second)
	for {
		c, err := net.Dial("unix", socket)
		if err == nil {
			return c.Close()
		}
		select {
		case <-exited:
			return fmt.Errorf("process exited after creating %s: %w", socket, err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("socket %s created but not accepting: %w", socket, err)
		}
	}
}

func (p *Process) readLines(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for sc.Scan() {
		select {
		case p.Lines <- sc.Text():
		default: // nobody is reading
		}
	}
	_ = p.cmd.Wait()
	close(p.exited)
}

// Stop sends SIGTERM and waits; SIGKILL after timeout. It returns the exit code (-1 if killed).
func (p *Process) Stop(timeout time.Duration) (int, error) {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return -1, fmt.Errorf("SIGTERM pid %d: %w", p.Pid(), err)
	}
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode(), nil
	case <-time.After(timeout):
		p.Kill()
		return -1, fmt.Errorf("pid %d still running %s after SIGTERM; killed", p.Pid(), timeout)
	}
}

// Kill sends SIGKILL and waits for the exit.
func (p *Process) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }
