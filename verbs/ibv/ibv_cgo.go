//go:build rdma && cgo

package ibv

/*
#cgo LDFLAGS: -libverbs
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "shim.h"

// list_devices copies up to max device names (64 bytes each) into names and
// returns the count, or -errno. One cgo call for the whole list.
static int list_devices(char *names, int max) {
	int num = 0;
	errno = 0;
	struct ibv_device **list = ibv_get_device_list(&num);
	if (!list)
		return errno ? -errno : -ENODEV;
	int n = 0;
	for (int i = 0; i < num && n < max; i++, n++) {
		const char *s = ibv_get_device_name(list[i]);
		snprintf(names + 64 * n, 64, "%s", s ? s : "");
	}
	ibv_free_device_list(list);
	return n;
}

static struct ibv_context *open_by_name(const char *name) {
	int num = 0;
	struct ibv_device **list = ibv_get_device_list(&num);
	if (!list)
		return NULL;
	struct ibv_context *ctx = NULL;
	for (int i = 0; i < num; i++) {
		if (strcmp(ibv_get_device_name(list[i]), name) == 0) {
			ctx = ibv_open_device(list[i]);
			break;
		}
	}
	ibv_free_device_list(list);
	return ctx;
}
*/
import "C"

import (
	"fmt"
	"sync"
	"syscall"
	"unsafe"

	"github.com/rdma-appliance/appliance/dpdk/sysfs"
	"github.com/rdma-appliance/appliance/verbs"
)

// Available says whether this build can use libibverbs.
const Available = true

// DeviceNames lists the RDMA devices libibverbs sees. Without kernel RDMA
// support it fails with ENOSYS, which callers treat as "no devices".
func DeviceNames() ([]string, error) {
	const max = 64
	buf := C.malloc(64 * max)
	defer C.free(buf)
	n := int(C.list_devices((*C.char)(buf), max))
	if n < 0 {
		return nil, fmt.Errorf("ibv_get_device_list: %w", syscall.Errno(-n))
	}
	names := make([]string, n)
	for i := range names {
		names[i] = C.GoString((*C.char)(unsafe.Add(buf, 64*i)))
	}
	return names, nil
}

func errnoErr(what string, rc C.int) error {
	if rc >= 0 {
		return nil
	}
	e := syscall.Errno(-rc)
	switch e {
	case syscall.EINVAL:
		return fmt.Errorf("%s: %w (%v)", what, verbs.ErrInvalidArgument, e)
	case syscall.ENOMEM:
		return fmt.Errorf("%s: %w (%v)", what, verbs.ErrNoMemory, e)
	case syscall.EBUSY:
		return fmt.Errorf("%s: %w (%v)", what, verbs.ErrBusy, e)
	case syscall.EOPNOTSUPP:
		return fmt.Errorf("%s: %w (%v)", what, verbs.ErrNotSupported, e)
	}
	return fmt.Errorf("%s: %w", what, e)
}

type provider struct{}

func (provider) Name() string { return "ibv" }

func (provider) Devices() ([]verbs.DeviceInfo, error) {
	names, err := DeviceNames()
	if err != nil {
		return nil, err
	}
	netdevs := map[string]string{}
	if devs, err := sysfs.List(); err == nil {
		for _, d := range devs {
			if d.RDMA != "" {
				netdevs[d.RDMA] = d.Name
			}
		}
	}
	out := make([]verbs.DeviceInfo, 0, len(names))
	for _, n := range names {
		info := verbs.DeviceInfo{Name: n, Provider: "ibv", Netdev: netdevs[n]}
		if d, err := openDevice(n); err == nil {
			info = d.info
			d.Close()
		}
		out = append(out, info)
	}
	return out, nil
}

func (provider) Open(name string) (verbs.Device, error) { return openDevice(name) }

func init() { verbs.Register(provider{}) }

// Device is an open libibverbs context.
type Device struct {
	ctx  *C.struct_ibv_context
	info verbs.DeviceInfo
	khz  uint64
	once sync.Once

	evOnce sync.Once
	events chan verbs.AsyncEvent
	evDone chan struct{}
	evWG   sync.WaitGroup
	cqs    sync.Map // *C.struct_ibv_cq -> *CQ, to name the CQ of a CQ event

	gidMu  sync.Mutex
	gidIdx map[int][]int // per port: PortAttr.GIDs index -> GID table index
}

var (
	_ verbs.Device      = (*Device)(nil)
	_ verbs.EventSource = (*Device)(nil)
)

// AsyncEvents implements verbs.EventSource: the first call starts a reader
// of the context's async fd (ibv_get_async_event), which acknowledges every
// event and drops those nobody takes.
func (d *Device) AsyncEvents() <-chan verbs.AsyncEvent {
	d.evOnce.Do(func() {
		d.evWG.Add(1)
		go d.readEvents()
	})
	return d.events
}

func (d *Device) readEvents() {
	defer d.evWG.Done()
	defer close(d.events)
	var ev C.struct_app_async_event
	for {
		select {
		case <-d.evDone:
			return
		default:
		}
		rc := C.app_get_async_event(d.ctx, 100, &ev)
		if rc < 0 {
			return
		}
		if rc == 0 {
			continue
		}
		out := verbs.AsyncEvent{Type: verbs.AsyncEventType(ev._type), QPN: uint32(ev.qpn), Port: int(ev.port)}
		if ev.cq != nil {
			if c, ok := d.cqs.Load(ev.cq); ok {
				out.CQ = c.(*CQ)
			}
		}
		select {
		case d.events <- out:
		default:
		}
	}
}

func openDevice(name string) (*Device, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	ctx := C.open_by_name(cname)
	if ctx == nil {
		return nil, fmt.Errorf("%w: ibv device %q", verbs.ErrNoDevice, name)
	}
	var a C.struct_app_dev_attr
	if rc := C.app_query_device(ctx, &a); rc < 0 {
		C.ibv_close_device(ctx)
		return nil, errnoErr("ibv_query_device", rc)
	}
	d := &Device{ctx: ctx, khz: uint64(a.hca_core_clock_khz), events: make(chan verbs.AsyncEvent, 256),
		evDone: make(chan struct{})}
	d.info = verbs.DeviceInfo{Name: name, Provider: "ibv", NodeGUID: uint64(a.node_guid), Ports: int(a.phys_port_cnt),
		MaxQP: int(a.max_qp), MaxQPWR: int(a.max_qp_wr), MaxSGE: min(int(a.max_sge), C.APP_MAX_SGE),
		MaxCQE: int(a.max_cqe), MaxMRSize: uint64(a.max_mr_size), MaxQPRdAtom: int(a.max_qp_rd_atom),
		CompletionTimestamps: a.ts_mask != 0 && a.hca_core_clock_khz != 0, ClockHz: uint64(a.hca_core_clock_khz) * 1000}
	if devs, err := sysfs.List(); err == nil {
		for _, nd := range devs {
			if nd.RDMA == name {
				d.info.Netdev = nd.Name
			}
		}
	}
	return d, nil
}

// Info describes the device.
func (d *Device) Info() verbs.DeviceInfo { return d.info }

// QueryPort returns the port's state, MTUs and RoCEv2 GIDs.
func (d *Device) QueryPort(port int) (verbs.PortAttr, error) {
	var a C.struct_app_port_attr
	if rc := C.app_query_port(d.ctx, C.int(port), &a); rc < 0 {
		return verbs.PortAttr{}, errnoErr("ibv_query_port", rc)
	}
	pa := verbs.PortAttr{State: verbs.PortState(a.state), MaxMTU: verbs.MTU(a.max_mtu), ActiveMTU: verbs.MTU(a.active_mtu)}
	idx := make([]int, 0, int(a.ngids))
	for i := 0; i < int(a.ngids); i++ {
		var g verbs.GID
		for j := range g {
			g[j] = byte(a.gids[i][j])
		}
		pa.GIDs = append(pa.GIDs, g)
		idx = append(idx, int(a.gid_index[i]))
	}
	d.gidMu.Lock()
	if d.gidIdx == nil {
		d.gidIdx = map[int][]int{}
	}
	d.gidIdx[port] = idx
	d.gidMu.Unlock()
	return pa, nil
}

// PortAttr.GIDs lists the RoCEv2 entries of the port's GID table only, and
// verbs.AHAttr.SGIDIndex indexes that list; the NIC's sgid_index indexes the
// whole table, where RoCEv1 entries sit between them. tableIndex maps the
// first to the second, toListIndex back.
func (d *Device) tableIndex(port, i int) (int, error) {
	if port == 0 {
		port = 1
	}
	d.gidMu.Lock()
	idx, ok := d.gidIdx[port]
	d.gidMu.Unlock()
	if !ok || i >= len(idx) {
		if _, err := d.QueryPort(port); err != nil {
			return 0, err
		}
		d.gidMu.Lock()
		idx = d.gidIdx[port]
		d.gidMu.Unlock()
	}
	if i < 0 || i >= len(idx) {
		return 0, fmt.Errorf("%w: sgid_index %d: port %d has %d RoCEv2 GIDs", verbs.ErrInvalidArgument, i, port, len(idx))
	}
	return idx[i], nil
}

func (d *Device) toListIndex(port, table int) int {
	if port == 0 {
		port = 1
	}
	d.gidMu.Lock()
	defer d.gidMu.Unlock()
	for i, t := range d.gidIdx[port] {
		if t == table {
			return i
		}
	}
	return table
}

// Close closes the context.
func (d *Device) Close() error {
	var err error
	d.once.Do(func() {
		close(d.evDone)
		d.evWG.Wait()
		if rc := C.ibv_close_device(d.ctx); rc != 0 {
			err = errnoErr("ibv_close_device", -rc)
		}
	})
	return err
}

// AllocPD allocates a protection domain.
func (d *Device) AllocPD() (verbs.PD, error) {
	pd := C.ibv_alloc_pd(d.ctx)
	if pd == nil {
		return nil, fmt.Errorf("ibv_alloc_pd: %w", verbs.ErrNoMemory)
	}
	return &PD{pd: pd, dev: d}, nil
}

// CreateCQ creates an extended CQ, with completion timestamps when asked,
// and a completion channel behind Notify.
func (d *Device) CreateCQ(attr verbs.CQAttr) (verbs.CQ, error) {
	if attr.CompletionTimestamps && !d.info.CompletionTimestamps {
		return nil, fmt.Errorf("%w: %s has no completion timestamps", verbs.ErrNotSupported, d.info.Name)
	}
	ch := C.ibv_create_comp_channel(d.ctx)
	if ch == nil {
		return nil, fmt.Errorf("ibv_create_comp_channel: %w", verbs.ErrNoMemory)
	}
	ts := C.int(0)
	if attr.CompletionTimestamps {
		ts = 1
	}
	cq := C.app_create_cq(d.ctx, C.int(max(attr.CQE, 1)), ts, ch)
	if cq == nil {
		C.ibv_destroy_comp_channel(ch)
		return nil, fmt.Errorf("ibv_create_cq_ex: %w", verbs.ErrNoMemory)
	}
	c := &CQ{cq: cq, ch: ch, ts: ts, khz: d.khz, notify: make(chan struct{}, 1), done: make(chan struct{}), dev: d}
	d.cqs.Store(C.ibv_cq_ex_to_cq(cq), c)
	c.wcs = (*[1 << 20]C.struct_app_wc)(C.calloc(C.size_t(cqBurst), C.size_t(unsafe.Sizeof(C.struct_app_wc{}))))[:cqBurst:cqBurst]
	go c.waitEvents()
	return c, nil
}

const cqBurst = 256

// CQ is an extended completion queue.
type CQ struct {
	cq     *C.struct_ibv_cq_ex
	ch     *C.struct_ibv_comp_channel
	ts     C.int
	khz    uint64
	wcs    []C.struct_app_wc
	notify chan struct{}
	done   chan struct{}
	once   sync.Once
	dev    *Device
}

var _ verbs.CQ = (*CQ)(nil)

// Poll reads up to len(wcs) completions in one cgo call per 256.
func (c *CQ) Poll(wcs []verbs.WC) (int, error) {
	got := 0
	for got < len(wcs) {
		want := min(len(wcs)-got, cqBurst)
		n := int(C.app_poll_cq(c.cq, c.ts, &c.wcs[0], C.int(want)))
		if n < 0 {
			return got, errnoErr("ibv_poll_cq", C.int(n))
		}
		for i := 0; i < n; i++ {
			w := &c.wcs[i]
			o := &wcs[got+i]
			*o = verbs.WC{ID: uint64(w.id), Status: verbs.WCStatus(w.status), Opcode: verbs.WCOpcode(w.opcode),
				ByteLen: uint32(w.byte_len), Imm: uint32(w.imm), QPN: uint32(w.qpn), SrcQP: uint32(w.src_qp),
				VendorErr: uint32(w.vendor_err)}
			if w.flags&C.IBV_WC_GRH != 0 {
				o.Flags |= verbs.WCWithGRH
			}
			if w.flags&C.IBV_WC_WITH_IMM != 0 {
				o.Flags |= verbs.WCWithImm
			}
			if c.ts != 0 && c.khz != 0 {
				o.Timestamp = int64(uint64(w.ts) * 1_000_000 / c.khz)
			}
		}
		got += n
		if n < want {
			break
		}
	}
	return got, nil
}

// waitEvents turns completion channel events into Notify signals; it blocks
// in ibv_get_cq_event on its own thread until the channel is destroyed.
func (c *CQ) waitEvents() {
	for {
		if rc := C.app_wait_cq(c.ch); rc < 0 {
			return
		}
		select {
		case <-c.done:
			return
		case c.notify <- struct{}{}:
		default:
		}
	}
}

// Notify receives after new completions.
func (c *CQ) Notify() <-chan struct{} { return c.notify }

// Destroy destroys the CQ and its channel.
func (c *CQ) Destroy() error {
	var err error
	c.once.Do(func() {
		close(c.done)
		c.dev.cqs.Delete(C.ibv_cq_ex_to_cq(c.cq))
		if rc := C.ibv_destroy_cq(C.ibv_cq_ex_to_cq(c.cq)); rc != 0 {
			err = errnoErr("ibv_destroy_cq", -rc)
		}
		C.ibv_destroy_comp_channel(c.ch)
		C.free(unsafe.Pointer(&c.wcs[0]))
	})
	return err
}

// PD is a protection domain.
type PD struct {
	pd  *C.struct_ibv_pd
	dev *Device
}

var _ verbs.PD = (*PD)(nil)

// RegMR registers buf, which must not be Go heap memory (use
// verbs.AllocBuffer): the NIC reads and writes it after this call returns.
func (p *PD) RegMR(buf []byte, access verbs.Access) (verbs.MR, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("ibv_reg_mr: %w: empty buffer", verbs.ErrInvalidArgument)
	}
	if err := access.Validate(); err != nil {
		return nil, err
	}
	mr := C.ibv_reg_mr(p.pd, unsafe.Pointer(&buf[0]), C.size_t(len(buf)), C.int(access))
	if mr == nil {
		return nil, fmt.Errorf("ibv_reg_mr: %w", verbs.ErrNoMemory)
	}
	return &MR{mr: mr, buf: buf, access: access}, nil
}

// CreateQP creates a queue pair on CQs of this device.
func (p *PD) CreateQP(attr verbs.QPInitAttr) (verbs.QP, error) {
	scq, ok1 := attr.SendCQ.(*CQ)
	rcq, ok2 := attr.RecvCQ.(*CQ)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%w: CQs of another provider", verbs.ErrInvalidArgument)
	}
	caps := C.struct_app_qp_attr{max_send_wr: C.uint32_t(attr.Cap.MaxSendWR), max_recv_wr: C.uint32_t(attr.Cap.MaxRecvWR),
		max_send_sge: C.uint32_t(max(attr.Cap.MaxSendSGE, 1)), max_recv_sge: C.uint32_t(max(attr.Cap.MaxRecvSGE, 1)),
		max_inline: C.uint32_t(attr.Cap.MaxInlineData)}
	sig := C.int(0)
	if attr.SigAll {
		sig = 1
	}
	qp := C.app_create_qp(p.pd, C.int(attr.Type), scq.cq, rcq.cq, &caps, sig)
	if qp == nil {
		return nil, fmt.Errorf("ibv_create_qp: %w", verbs.ErrNoMemory)
	}
	q := &QP{qp: qp, typ: attr.Type, dev: p.dev, cap: verbs.QPCap{MaxSendWR: int(caps.max_send_wr), MaxRecvWR: int(caps.max_recv_wr),
		MaxSendSGE: int(caps.max_send_sge), MaxRecvSGE: int(caps.max_recv_sge), MaxInlineData: int(caps.max_inline)}}
	q.wrs = (*[1 << 16]C.struct_app_wr)(C.calloc(postBurst, C.size_t(unsafe.Sizeof(C.struct_app_wr{}))))[:postBurst:postBurst]
	q.sscratch = C.calloc(postBurst, C.size_t(unsafe.Sizeof(C.struct_ibv_send_wr{})))
	q.rscratch = C.calloc(postBurst, C.size_t(unsafe.Sizeof(C.struct_ibv_recv_wr{})))
	return q, nil
}

// CreateAH creates an address handle for UD sends.
func (p *PD) CreateAH(attr verbs.AHAttr) (verbs.AH, error) {
	a := ahToC(attr)
	sgid, err := p.dev.tableIndex(attr.Port, attr.SGIDIndex)
	if err != nil {
		return nil, fmt.Errorf("ibv_create_ah: %w", err)
	}
	a.sgid_index = C.uint32_t(sgid)
	ah := C.app_create_ah(p.pd, &a)
	if ah == nil {
		return nil, fmt.Errorf("ibv_create_ah: %w", verbs.ErrInvalidArgument)
	}
	return &AH{ah: ah, attr: attr}, nil
}

// Dealloc frees the protection domain.
func (p *PD) Dealloc() error {
	if rc := C.ibv_dealloc_pd(p.pd); rc != 0 {
		return errnoErr("ibv_dealloc_pd", -rc)
	}
	return nil
}

// MR is a registered memory region.
type MR struct {
	mr     *C.struct_ibv_mr
	buf    []byte
	access verbs.Access
}

var _ verbs.MR = (*MR)(nil)

// LKey is the local key.
func (m *MR) LKey() uint32 { return uint32(m.mr.lkey) }

// RKey is the remote key.
func (m *MR) RKey() uint32 { return uint32(m.mr.rkey) }

// Addr is the region's virtual address.
func (m *MR) Addr() uint64 { return uint64(uintptr(m.mr.addr)) }

// Len is the region's length.
func (m *MR) Len() int { return len(m.buf) }

// Buf is the registered memory.
func (m *MR) Buf() []byte { return m.buf }

// Access are the region's access flags.
func (m *MR) Access() verbs.Access { return m.access }

// Dereg deregisters the region.
func (m *MR) Dereg() error {
	if rc := C.ibv_dereg_mr(m.mr); rc != 0 {
		return errnoErr("ibv_dereg_mr", -rc)
	}
	return nil
}

// AH is an address handle.
type AH struct {
	ah   *C.struct_ibv_ah
	attr verbs.AHAttr
}

var _ verbs.AH = (*AH)(nil)

// Attr returns the attributes the handle was made with.
func (a *AH) Attr() verbs.AHAttr { return a.attr }

// Destroy destroys the handle.
func (a *AH) Destroy() error {
	if rc := C.ibv_destroy_ah(a.ah); rc != 0 {
		return errnoErr("ibv_destroy_ah", -rc)
	}
	return nil
}

func ahToC(a verbs.AHAttr) C.struct_app_qp_attr {
	var c C.struct_app_qp_attr
	for i, b := range a.DGID {
		c.dgid[i] = C.uint8_t(b)
	}
	c.sgid_index = C.uint32_t(a.SGIDIndex)
	c.flow_label = C.uint32_t(a.FlowLabel)
	c.hop_limit = C.uint32_t(a.HopLimit)
	c.traffic_class = C.uint32_t(a.TrafficClass)
	c.sl = C.uint32_t(a.SL)
	c.ah_port = C.uint32_t(a.Port)
	return c
}

const postBurst = 64

// QP is a queue pair.
type QP struct {
	qp       *C.struct_ibv_qp
	typ      verbs.QPType
	dev      *Device
	cap      verbs.QPCap // as created (ibv_create_qp updates the request)
	mu       sync.Mutex  // posts from several goroutines share the scratch arrays
	wrs      []C.struct_app_wr
	sscratch unsafe.Pointer
	rscratch unsafe.Pointer
}

var _ verbs.QP = (*QP)(nil)

// QPN is the queue pair number.
func (q *QP) QPN() uint32 { return uint32(q.qp.qp_num) }

// Type is the transport type.
func (q *QP) Type() verbs.QPType { return q.typ }

// Modify validates the transition as the kernel will, then applies it.
func (q *QP) Modify(attr *verbs.QPAttr, mask verbs.AttrMask) error {
	cur, err := q.Query()
	if err != nil {
		return err
	}
	if _, err := verbs.CheckModify(q.typ, cur.State, attr, mask); err != nil {
		return err
	}
	c := ahToC(attr.AH)
	if mask&verbs.AttrAV != 0 {
		sgid, err := q.dev.tableIndex(attr.AH.Port, attr.AH.SGIDIndex)
		if err != nil {
			return fmt.Errorf("ibv_modify_qp: %w", err)
		}
		c.sgid_index = C.uint32_t(sgid)
	}
	c.state, c.cur_state, c.path_mtu = C.uint32_t(attr.State), C.uint32_t(attr.CurState), C.uint32_t(attr.PathMTU)
	c.qkey, c.rq_psn, c.sq_psn, c.dest_qpn = C.uint32_t(attr.QKey), C.uint32_t(attr.RQPSN), C.uint32_t(attr.SQPSN), C.uint32_t(attr.DestQPN)
	c.access, c.pkey_index = C.uint32_t(attr.AccessFlags), C.uint32_t(attr.PKeyIndex)
	c.max_rd_atomic, c.max_dest_rd_atomic = C.uint32_t(attr.MaxRdAtomic), C.uint32_t(attr.MaxDestRdAtomic)
	c.min_rnr_timer, c.port, c.timeout = C.uint32_t(attr.MinRNRTimer), C.uint32_t(attr.Port), C.uint32_t(attr.Timeout)
	c.retry_cnt, c.rnr_retry = C.uint32_t(attr.RetryCnt), C.uint32_t(attr.RNRRetry)
	if attr.EnSQDAsyncNotify {
		c.en_sqd_async_notify = 1
	}
	return errnoErr("ibv_modify_qp", C.app_modify_qp(q.qp, &c, C.int(mask)))
}

// Query returns the QP's attributes.
func (q *QP) Query() (verbs.QPAttr, error) {
	var c C.struct_app_qp_attr
	if rc := C.app_query_qp(q.qp, &c); rc < 0 {
		return verbs.QPAttr{}, errnoErr("ibv_query_qp", rc)
	}
	a := verbs.QPAttr{State: verbs.QPState(c.state), CurState: verbs.QPState(c.cur_state), PathMTU: verbs.MTU(c.path_mtu),
		QKey: uint32(c.qkey), RQPSN: uint32(c.rq_psn), SQPSN: uint32(c.sq_psn), DestQPN: uint32(c.dest_qpn),
		AccessFlags: verbs.Access(c.access), PKeyIndex: uint16(c.pkey_index), MaxRdAtomic: uint8(c.max_rd_atomic),
		MaxDestRdAtomic: uint8(c.max_dest_rd_atomic), MinRNRTimer: uint8(c.min_rnr_timer), Port: uint8(c.port),
		Timeout: uint8(c.timeout), RetryCnt: uint8(c.retry_cnt), RNRRetry: uint8(c.rnr_retry),
		EnSQDAsyncNotify: c.en_sqd_async_notify != 0, SQDraining: c.sq_draining != 0,
		Cap: verbs.QPCap{MaxSendWR: int(c.max_send_wr), MaxRecvWR: int(c.max_recv_wr), MaxSendSGE: int(c.max_send_sge),
			MaxRecvSGE: int(c.max_recv_sge), MaxInlineData: int(c.max_inline)}}
	for i := range a.AH.DGID {
		a.AH.DGID[i] = byte(c.dgid[i])
	}
	a.AH.SGIDIndex, a.AH.FlowLabel, a.AH.HopLimit = q.dev.toListIndex(int(c.ah_port), int(c.sgid_index)), uint32(c.flow_label), uint8(c.hop_limit)
	a.AH.TrafficClass, a.AH.SL, a.AH.Port = uint8(c.traffic_class), uint8(c.sl), int(c.ah_port)
	return a, nil
}

func fillSGL(w *C.struct_app_wr, sgl []verbs.SGE) error {
	if len(sgl) > C.APP_MAX_SGE {
		return fmt.Errorf("%w: %d SGEs, at most %d", verbs.ErrTooLarge, len(sgl), C.APP_MAX_SGE)
	}
	w.num_sge = C.uint32_t(len(sgl))
	for i, s := range sgl {
		w.sge[i].addr, w.sge[i].length, w.sge[i].lkey = C.uint64_t(s.Addr), C.uint32_t(s.Length), C.uint32_t(s.LKey)
	}
	return nil
}

// state is the QP state libibverbs keeps from the last successful
// ibv_modify_qp (not a state the NIC moved the QP to by itself).
func (q *QP) state() verbs.QPState { return verbs.QPState(q.qp.state) }

// checkSend checks a send request against what the verbs API promises
// whatever the NIC: the SGE count and inline size against the QP's
// capabilities (verbs.ErrTooLarge), where providers answer EINVAL or
// ENOMEM, indistinguishable from other causes.
func (q *QP) checkSend(wr *verbs.SendWR) error {
	if len(wr.SGL) > q.cap.MaxSendSGE {
		return fmt.Errorf("%w: %d SGEs, the QP takes %d", verbs.ErrTooLarge, len(wr.SGL), q.cap.MaxSendSGE)
	}
	if wr.Flags&verbs.SendInline != 0 && wr.Len() > uint64(q.cap.MaxInlineData) {
		return fmt.Errorf("%w: %d bytes inline, the QP takes %d", verbs.ErrTooLarge, wr.Len(), q.cap.MaxInlineData)
	}
	return nil
}

// postErr maps the errno of ibv_post_send or ibv_post_recv: ENOMEM is a
// full work queue once checkSend has ruled out oversize requests.
func postErr(what string, errno C.int) error {
	if syscall.Errno(errno) == syscall.ENOMEM {
		return fmt.Errorf("%s: %w (%v)", what, verbs.ErrQueueFull, syscall.ENOMEM)
	}
	return errnoErr(what, -errno)
}

// PostSend posts send work requests, one cgo call per 64. Sends are refused
// with verbs.ErrBadState before RTS, as ibverbs requires; a QP in ERR
// accepts them and flushes them, as the IBTA specifies.
func (q *QP) PostSend(wrs []verbs.SendWR) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if st := q.state(); st == verbs.QPSReset || st == verbs.QPSInit || st == verbs.QPSRTR {
		return &verbs.PostError{Index: 0, Err: fmt.Errorf("%w: QP %#x is %v", verbs.ErrBadState, q.QPN(), st)}
	}
	for base := 0; base < len(wrs); base += postBurst {
		chunk := wrs[base:min(len(wrs), base+postBurst)]
		// A bad request stops the post there; those before it are
		// posted, as the PostError contract says.
		fail := func(i int, err error) error {
			if i > 0 {
				if perr := q.postSend(base, i); perr != nil {
					return perr
				}
			}
			return &verbs.PostError{Index: base + i, Err: err}
		}
		for i := range chunk {
			wr := &chunk[i]
			if err := q.checkSend(wr); err != nil {
				return fail(i, err)
			}
			w := &q.wrs[i]
			*w = C.struct_app_wr{id: C.uint64_t(wr.ID), remote_addr: C.uint64_t(wr.RemoteAddr),
				compare_add: C.uint64_t(wr.CompareAdd), swap: C.uint64_t(wr.Swap), opcode: C.uint32_t(wr.Opcode),
				flags: C.uint32_t(wr.Flags), imm: C.uint32_t(wr.Imm), rkey: C.uint32_t(wr.RKey),
				remote_qpn: C.uint32_t(wr.RemoteQPN), remote_qkey: C.uint32_t(wr.RemoteQKey)}
			if wr.AH != nil {
				ah, ok := wr.AH.(*AH)
				if !ok {
					return fail(i, fmt.Errorf("%w: AH of another provider", verbs.ErrInvalidArgument))
				}
				w.ah = ah.ah
			}
			if err := fillSGL(w, wr.SGL); err != nil {
				return fail(i, err)
			}
		}
		if err := q.postSend(base, len(chunk)); err != nil {
			return err
		}
	}
	return nil
}

// postSend posts the first n prepared requests of the chunk at base.
func (q *QP) postSend(base, n int) error {
	var errno C.int
	if bad := int(C.app_post_send(q.qp, &q.wrs[0], C.int(n), (*C.struct_ibv_send_wr)(q.sscratch), &errno)); bad >= 0 {
		return &verbs.PostError{Index: base + bad, Err: postErr("ibv_post_send", errno)}
	}
	return nil
}

// PostRecv posts receive work requests, one cgo call per 64. Receives are
// refused with verbs.ErrBadState in RESET.
func (q *QP) PostRecv(wrs []verbs.RecvWR) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if st := q.state(); st == verbs.QPSReset {
		return &verbs.PostError{Index: 0, Err: fmt.Errorf("%w: QP %#x is %v", verbs.ErrBadState, q.QPN(), st)}
	}
	for base := 0; base < len(wrs); base += postBurst {
		chunk := wrs[base:min(len(wrs), base+postBurst)]
		for i := range chunk {
			var err error
			if len(chunk[i].SGL) > q.cap.MaxRecvSGE {
				err = fmt.Errorf("%w: %d SGEs, the QP takes %d", verbs.ErrTooLarge, len(chunk[i].SGL), q.cap.MaxRecvSGE)
			} else {
				q.wrs[i] = C.struct_app_wr{id: C.uint64_t(chunk[i].ID)}
				err = fillSGL(&q.wrs[i], chunk[i].SGL)
			}
			if err != nil {
				if i > 0 {
					if err := q.postRecv(base, i); err != nil {
						return err
					}
				}
				return &verbs.PostError{Index: base + i, Err: err}
			}
		}
		if err := q.postRecv(base, len(chunk)); err != nil {
			return err
		}
	}
	return nil
}

// postRecv posts the first n prepared receives of the chunk at base.
func (q *QP) postRecv(base, n int) error {
	var errno C.int
	if bad := int(C.app_post_recv(q.qp, &q.wrs[0], C.int(n), (*C.struct_ibv_recv_wr)(q.rscratch), &errno)); bad >= 0 {
		return &verbs.PostError{Index: base + bad, Err: postErr("ibv_post_recv", errno)}
	}
	return nil
}

// Destroy destroys the QP.
func (q *QP) Destroy() error {
	if rc := C.ibv_destroy_qp(q.qp); rc != 0 {
		return errnoErr("ibv_destroy_qp", -rc)
	}
	C.free(unsafe.Pointer(&q.wrs[0]))
	C.free(q.sscratch)
	C.free(q.rscratch)
	return nil
}
