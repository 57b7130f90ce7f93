package guest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// qmpListener is the test's end of a qemu monitor: the test listens on a unix socket and qemu connects to
// it at start-up (-chardev socket without server=on, -mon mode=control), so the test needs no retry loop
// waiting for qemu's socket to appear.
type qmpListener struct {
	ln   *net.UnixListener
	path string
}

// listenQMP listens on dir/name.sock; QemuArgs gives qemu's side, as the chroot sees dir (chrootDir).
func listenQMP(dir, name string) (*qmpListener, error) {
	path := filepath.Join(dir, name+".sock")
	_ = os.Remove(path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen for qemu's monitor on %s: %w", path, err)
	}
	return &qmpListener{ln: ln, path: path}, nil
}

// QemuArgs is the monitor's qemu arguments, with the socket at chrootDir/<name>.sock.
func (l *qmpListener) QemuArgs(chrootDir string) []string {
	id := "qmp-" + filepath.Base(l.path)
	return []string{"-chardev", "socket,id=" + id + ",path=" + chrootDir + "/" + filepath.Base(l.path), "-mon", "chardev=" + id + ",mode=control"}
}

// Accept waits (bounded by ctx) for qemu to connect, reads the greeting and enters command mode.
func (l *qmpListener) Accept(ctx context.Context) (*qmpConn, error) {
	defer l.ln.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = l.ln.SetDeadline(dl)
	}
	c, err := l.ln.AcceptUnix()
	if err != nil {
		return nil, fmt.Errorf("qemu did not connect to its monitor socket %s: %w", l.path, err)
	}
	q := &qmpConn{conn: c, replies: make(chan qmpMessage, 1), events: make(chan qmpMessage, 256), closed: make(chan struct{})}
	greeting := make(chan error, 1)
	go q.read(greeting)
	select {
	case err := <-greeting:
		if err != nil {
			c.Close()
			return nil, err
		}
	case <-ctx.Done():
		c.Close()
		return nil, fmt.Errorf("no QMP greeting on %s: %w", l.path, ctx.Err())
	}
	if _, err := q.Execute(ctx, "qmp_capabilities", nil); err != nil {
		c.Close()
		return nil, err
	}
	return q, nil
}

// qmpMessage is one message from qemu: a greeting, a command's return or error, or an event.
type qmpMessage struct {
	QMP    json.RawMessage `json:"QMP"`
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

// qmpConn is a QMP session. Commands run one at a time (Execute waits for its reply); events queue up
// until WaitEvent reads them.
type qmpConn struct {
	conn    net.Conn
	replies chan qmpMessage
	events  chan qmpMessage
	closed  chan struct{}
	readErr error
}

func (q *qmpConn) read(greeting chan<- error) {
	defer close(q.closed)
	sc := bufio.NewScanner(q.conn)
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	first := true
	for sc.Scan() {
		var m qmpMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			q.readErr = fmt.Errorf("QMP message %q: %w", sc.Text(), err)
			break
		}
		switch {
		case first:
			first = false
			if m.QMP == nil {
				greeting <- fmt.Errorf("QMP greeting expected, got %q", sc.Text())
				return
			}
			greeting <- nil
		case m.Event != "":
			select {
			case q.events <- m:
			default: // nobody waits for that many events; drop rather than block the replies
			}
		default:
			q.replies <- m
		}
	}
	if q.readErr == nil {
		q.readErr = fmt.Errorf("QMP connection closed: %v", sc.Err())
	}
	if first {
		greeting <- q.readErr
	}
}

// Execute runs one QMP command and returns its "return" value; a QMP error names the command.
func (q *qmpConn) Execute(ctx context.Context, command string, args any) (json.RawMessage, error) {
	req := map[string]any{"execute": command}
	if args != nil {
		req["arguments"] = args
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("QMP %s: %w", command, err)
	}
	if _, err := q.conn.Write(append(body, '\n')); err != nil {
		return nil, fmt.Errorf("QMP %s: send: %w", command, err)
	}
	select {
	case m := <-q.replies:
		if m.Error != nil {
			return nil, fmt.Errorf("QMP %s %s: %s: %s", command, body, m.Error.Class, m.Error.Desc)
		}
		return m.Return, nil
	case <-q.closed:
		return nil, fmt.Errorf("QMP %s: %w", command, q.readErr)
	case <-ctx.Done():
		return nil, fmt.Errorf("QMP %s: no reply: %w", command, ctx.Err())
	}
}

// WaitEvent returns the data of the first event named name for which match (nil: any) is true; an event
// for which fail is true ends the wait with an error.
func (q *qmpConn) WaitEvent(ctx context.Context, name string, match, fail func(json.RawMessage) bool) (json.RawMessage, error) {
	start := time.Now()
	for {
		select {
		case m := <-q.events:
			if m.Event != name {
				continue
			}
			if fail != nil && fail(m.Data) {
				return m.Data, fmt.Errorf("QMP event %s: %s", name, m.Data)
			}
			if match == nil || match(m.Data) {
				return m.Data, nil
			}
		case <-q.closed:
			return nil, fmt.Errorf("waiting for QMP event %s: %w", name, q.readErr)
		case <-ctx.Done():
			return nil, fmt.Errorf("no QMP event %s after %s: %w", name, time.Since(start).Round(time.Second), ctx.Err())
		}
	}
}

// Events returns the names of the events queued and not yet read, without waiting.
func (q *qmpConn) Events() []string {
	var names []string
	for {
		select {
		case m := <-q.events:
			names = append(names, m.Event)
		default:
			return names
		}
	}
}

// Close ends the session.
func (q *qmpConn) Close() error {
	err := q.conn.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
