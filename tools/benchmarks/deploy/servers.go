package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/fleet"
)

// Bounds on the waits for a new instance to listen, and for an instance
// to exit once done or its stdin closed (then again once killed).
const (
	startLimit = 15 * time.Second
	exitLimit  = 5 * time.Second
)

// instance is a fleet server, a child process. Its address is known once
// it listens; firstAt (its first request, on its clock) and handled once
// it has stopped.
type instance struct {
	child   *fleet.Child
	addr    string
	firstAt time.Time
	handled int64
}

// at reads the time in args[i] (Unix nanoseconds); zero if there is none.
func at(args []string, i int) time.Time {
	if i < len(args) {
		if n, err := strconv.ParseInt(args[i], 10, 64); err == nil {
			return time.Unix(0, n)
		}
	}
	return time.Time{}
}

// leave asks the instance to leave with cmd and waits at most limit for it
// to be done, then for it to exit. It returns the error of the child's
// Shutdown, if any.
func (in *instance) leave(cmd string, limit time.Duration) error {
	if err := in.child.Proc.Send(cmd); err != nil {
		return err
	}
	done, err := in.child.Wait(lineDone, "leave ("+cmd+")", limit)
	closeErr := in.child.Proc.Close(exitLimit)
	switch {
	case err != nil:
		return fmt.Errorf("deploy: the server %s: %w", in.addr, err)
	case closeErr != nil:
		return closeErr
	case len(done) > 2:
		return fmt.Errorf("deploy: the server %s: %s: %s", in.addr, cmd, strings.Join(done[2:], " "))
	}
	return nil
}

// stop ends the instance, whatever its state, and reads its figures.
func (in *instance) stop() error {
	err := in.child.Proc.Close(exitLimit)
	in.firstAt = at(in.child.Seen(lineFirst), 0)
	if done := in.child.Seen(lineDone); len(done) > 1 {
		in.handled, _ = strconv.ParseInt(done[1], 10, 64)
	}
	return err
}

// servers is a row's servers and how they come and go.
type servers struct {
	cfg    Config
	row    Row
	etcd   string // RowEtcd's etcd client URL
	prefix string // where RowEtcd's servers register, fresh for each row
	zone   *zone  // RowDNS's records

	live []*instance // the fleet now, in the order they are replaced
	all  []*instance // every instance started
}

// replacement is what one replacement did, on the parent's clock but
// where it says otherwise.
type replacement struct {
	old, new  *instance
	start     time.Time // the replacement began
	available time.Time // the new instance was registered, listed, or listening (its clock)
	leaveFrom time.Time // the old instance was asked to leave
	left      time.Time // the old instance had left and exited
}

// startServers starts cfg.Instances servers for row and makes each
// available.
func startServers(cfg Config, row Row, etcdEndpoint string) (_ *servers, err error) {
	f := &servers{cfg: cfg, row: row, etcd: etcdEndpoint,
		prefix: fmt.Sprintf("sluice-deploy/%d/%s", time.Now().UnixNano(), Service)}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	if row == RowDNS {
		if f.zone, err = startZone(); err != nil {
			return nil, err
		}
	}
	for range cfg.Instances {
		in, _, err := f.startInstance("127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		f.live = append(f.live, in)
	}
	return f, nil
}

// startInstance starts a server on listen and waits until clients can
// find it: registered in etcd (RowEtcd), listed in the DNS zone (RowDNS),
// or listening. It returns when that happened.
func (f *servers) startInstance(listen string) (*instance, time.Time, error) {
	j := job{Server: serverSluice, Listen: listen, ServiceTime: f.cfg.ServiceTime.D(), Grace: f.cfg.Grace.D(), Quiet: f.cfg.Quiet.D()}
	switch f.row {
	case RowEtcd:
		j.Etcd, j.Prefix = f.etcd, f.prefix
	case RowTChannel:
		j.Server = serverTChannel
	}
	spec, err := json.Marshal(j)
	if err != nil {
		return nil, time.Time{}, err
	}
	c, err := fleet.Start(ChildEnv+"="+string(spec), "deploy.ServeChildIfAsked", startLimit, nil)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("deploy: the server: %w", err)
	}
	in := &instance{child: c, addr: c.Addr}
	f.all = append(f.all, in)
	switch f.row {
	case RowEtcd:
		args, err := c.Wait(lineRegistered, "register in etcd", registerLimit)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("deploy: the server %s: %w", in.addr, err)
		}
		return in, at(args, 0), nil
	case RowDNS:
		err := f.zone.add(in.addr)
		return in, time.Now(), err
	}
	return in, at(c.Seen(fleet.Listening), 1), nil
}

// replace replaces the i-th server. In the discovery rows a new server
// starts on a new port and becomes available, then the old one is taken
// off the DNS zone (RowDNS) and Shutdown; in the others the old one Closes
// and exits, then the new one listens on its port.
func (f *servers) replace(i int) (replacement, error) {
	r := replacement{old: f.live[i], start: time.Now()}
	var err error
	if f.row.discovery() {
		if r.new, r.available, err = f.startInstance("127.0.0.1:0"); err != nil {
			return r, err
		}
		if f.zone != nil {
			f.zone.remove(r.old.addr)
		}
		r.leaveFrom = time.Now()
		err = r.old.leave(cmdShutdown, f.cfg.Grace.D()+shutdownSlack+exitLimit)
		r.left = time.Now()
	} else {
		r.leaveFrom = time.Now()
		if err := r.old.leave(cmdClose, closeWait+exitLimit); err != nil {
			return r, err
		}
		r.left = time.Now()
		r.new, r.available, err = f.startInstance(r.old.addr)
	}
	if err != nil {
		return r, err
	}
	f.live[i] = r.new
	return r, nil
}

// close stops every server at once, waits for them, and stops the DNS
// zone.
func (f *servers) close() error {
	errs := make([]error, len(f.all)+1)
	var wg sync.WaitGroup
	for i, in := range f.all {
		wg.Go(func() { errs[i] = in.stop() })
	}
	wg.Wait()
	if f.zone != nil {
		errs[len(f.all)] = f.zone.close()
	}
	return errors.Join(errs...)
}
