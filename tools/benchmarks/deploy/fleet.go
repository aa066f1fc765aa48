package deploy

import (
	"errors"
	"fmt"
	"time"
)

// fleet is a row's servers and how they come and go.
type fleet struct {
	cfg  Config
	row  Row
	etcd string // RowEtcd: the etcd's client URL
	// prefix is where RowEtcd's servers register, fresh for each row.
	prefix string
	zone   *zone // RowDNS's records

	live []*instance // the fleet now, in the order they are replaced
	all  []*instance // every instance started, to stop them at the end
}

// replacement is what one replacement did, on the parent's clock except
// where it says otherwise.
type replacement struct {
	old, new  *instance
	start     time.Time // the replacement began
	available time.Time // the new instance was available: registered, listed, or listening (its clock)
	left      time.Time // the old instance had left and exited
	leaveFrom time.Time // the old instance was asked to leave
}

// startFleet starts cfg.Instances servers for row and makes each
// available.
func startFleet(cfg Config, row Row, etcdEndpoint string) (_ *fleet, err error) {
	f := &fleet{cfg: cfg, row: row, etcd: etcdEndpoint,
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

// job is what a new server of the row does, listening on listen.
func (f *fleet) job(listen string) job {
	j := job{Server: serverSluice, Listen: listen, ServiceTime: f.cfg.ServiceTime.D(), Grace: f.cfg.Grace.D(), Quiet: f.cfg.Quiet.D()}
	switch f.row {
	case RowEtcd:
		j.Etcd, j.Prefix = f.etcd, f.prefix
	case RowTChannel:
		j.Server = serverTChannel
	}
	return j
}

// startInstance starts a server on listen and waits until it is
// available to clients: registered in etcd (RowEtcd), listed in the DNS
// zone (RowDNS), or listening. It returns when that happened.
func (f *fleet) startInstance(listen string) (*instance, time.Time, error) {
	in, err := startInstance(f.job(listen))
	if err != nil {
		return nil, time.Time{}, err
	}
	f.all = append(f.all, in)
	if err := in.wait(in.listening, "listen", startLimit); err != nil {
		return nil, time.Time{}, err
	}
	listenAt, _, _ := in.times()
	switch f.row {
	case RowEtcd:
		if err := in.wait(in.registered, "register in etcd", registerLimit); err != nil {
			return nil, time.Time{}, err
		}
		_, registeredAt, _ := in.times()
		return in, registeredAt, nil
	case RowDNS:
		if err := f.zone.add(in.Addr()); err != nil {
			return nil, time.Time{}, err
		}
		return in, time.Now(), nil
	}
	return in, listenAt, nil
}

// leaveLimit bounds an old server's leaving: its Shutdown's grace, the
// slack its Shutdown allows itself, and its exit.
func (f *fleet) leaveLimit() time.Duration { return f.cfg.Grace.D() + shutdownSlack + exitLimit }

// replace replaces the i-th server of the fleet. In the discovery rows a
// new server starts on a new port and becomes available, then the old
// one is taken off the DNS zone (RowDNS) and Shutdown; in the others the
// old one Closes and exits, then the new one listens on its port.
func (f *fleet) replace(i int) (replacement, error) {
	r := replacement{old: f.live[i], start: time.Now()}
	var err error
	if f.row.discovery() {
		if r.new, r.available, err = f.startInstance("127.0.0.1:0"); err != nil {
			return r, err
		}
		if f.zone != nil {
			f.zone.remove(r.old.Addr())
		}
		r.leaveFrom = time.Now()
		if err := r.old.leave(cmdShutdown, f.leaveLimit()); err != nil {
			return r, err
		}
		r.left = time.Now()
	} else {
		r.leaveFrom = time.Now()
		if err := r.old.leave(cmdClose, closeWait+exitLimit); err != nil {
			return r, err
		}
		r.left = time.Now()
		if r.new, r.available, err = f.startInstance(r.old.Addr()); err != nil {
			return r, err
		}
	}
	f.live[i] = r.new
	return r, nil
}

// hostPorts returns the live servers' addresses.
func (f *fleet) hostPorts() []string {
	hps := make([]string, len(f.live))
	for i, in := range f.live {
		hps[i] = in.Addr()
	}
	return hps
}

// close stops every server still running and the DNS zone.
func (f *fleet) close() error {
	errs := []error{stopAll(f.all)}
	if f.zone != nil {
		errs = append(errs, f.zone.close())
	}
	return errors.Join(errs...)
}
