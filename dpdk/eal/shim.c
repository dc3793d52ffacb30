//go:build dpdk

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <emmintrin.h>

#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_memcpy.h>
#include <rte_prefetch.h>

#include "shim.h"

int shim_errno(void) { return rte_errno; }

int shim_dev_info(uint16_t port, struct shim_dev_info *out)
{
	struct rte_eth_dev_info di;
	int ret = rte_eth_dev_info_get(port, &di);
	if (ret != 0)
		return ret;
	memset(out, 0, sizeof(*out));
	snprintf(out->driver, sizeof(out->driver), "%s", di.driver_name ? di.driver_name : "");
	out->max_rx_queues = di.max_rx_queues;
	out->max_tx_queues = di.max_tx_queues;
	out->rx_desc_max = di.rx_desc_lim.nb_max;
	out->rx_desc_min = di.rx_desc_lim.nb_min;
	out->tx_desc_max = di.tx_desc_lim.nb_max;
	out->tx_desc_min = di.tx_desc_lim.nb_min;
	out->flow_type_rss_offloads = di.flow_type_rss_offloads;
	out->rx_offload_capa = di.rx_offload_capa;
	out->tx_offload_capa = di.tx_offload_capa;
	out->if_index = di.if_index;
	out->socket = rte_eth_dev_socket_id(port);
	out->min_rx_bufsize = di.min_rx_bufsize;
	out->max_rx_pktlen = di.max_rx_pktlen;
	return 0;
}

int shim_configure(uint16_t port, uint16_t nb_rxq, uint16_t nb_txq, uint64_t rss_hf,
		   uint64_t rx_offloads, uint64_t tx_offloads)
{
	struct rte_eth_conf conf;
	memset(&conf, 0, sizeof(conf));
	// RSS only when there is more than one queue to spread over and the device
	// hashes at least one of the requested flow types: ethdev rejects rss_hf bits
	// the device lacks, and some PMDs reject RSS mode with nothing to hash.
	if (nb_rxq > 1 && rss_hf != 0) {
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
	}
	conf.rxmode.offloads = rx_offloads;
	conf.txmode.offloads = tx_offloads;
	return rte_eth_dev_configure(port, nb_rxq, nb_txq, &conf);
}

int shim_queues_setup(uint16_t port, uint16_t nb_rxq, uint16_t nb_txq, uint16_t *nb_rxd,
		      uint16_t *nb_txd, int socket, struct rte_mempool *mp, uint64_t tx_offloads)
{
	struct rte_eth_dev_info di;
	struct rte_eth_txconf txconf;
	int ret = rte_eth_dev_adjust_nb_rx_tx_desc(port, nb_rxd, nb_txd);
	if (ret != 0)
		return ret;
	ret = rte_eth_dev_info_get(port, &di);
	if (ret != 0)
		return ret;
	for (uint16_t q = 0; q < nb_rxq; q++) {
		ret = rte_eth_rx_queue_setup(port, q, *nb_rxd, socket, NULL, mp);
		if (ret != 0)
			return ret;
	}
	txconf = di.default_txconf;
	txconf.offloads = tx_offloads;
	for (uint16_t q = 0; q < nb_txq; q++) {
		ret = rte_eth_tx_queue_setup(port, q, *nb_txd, socket, &txconf);
		if (ret != 0)
			return ret;
	}
	return 0;
}

int shim_port_info(uint16_t port, struct shim_port_info *out)
{
	struct rte_ether_addr mac;
	struct rte_eth_link link;
	memset(out, 0, sizeof(*out));
	if (rte_eth_macaddr_get(port, &mac) == 0)
		memcpy(out->mac, mac.addr_bytes, 6);
	if (rte_eth_dev_get_mtu(port, &out->mtu) != 0)
		out->mtu = 0;
	memset(&link, 0, sizeof(link));
	if (rte_eth_link_get_nowait(port, &link) == 0) {
		out->link_up = link.link_status == RTE_ETH_LINK_UP;
		if (link.link_speed != RTE_ETH_SPEED_NUM_UNKNOWN)
			out->speed_mbps = link.link_speed;
	}
	return 0;
}

int shim_stats_get(uint16_t port, struct shim_stats *out)
{
	struct rte_eth_stats s;
	int ret = rte_eth_stats_get(port, &s);
	if (ret != 0)
		return ret;
	out->ipackets = s.ipackets;
	out->opackets = s.opackets;
	out->ibytes = s.ibytes;
	out->obytes = s.obytes;
	out->imissed = s.imissed;
	out->ierrors = s.ierrors;
	out->oerrors = s.oerrors;
	out->rx_nombuf = s.rx_nombuf;
	return 0;
}

int shim_port_names(char *buf, int size)
{
	uint16_t p;
	int n = 0;
	char name[RTE_ETH_NAME_MAX_LEN];
	buf[0] = 0;
	RTE_ETH_FOREACH_DEV(p) {
		if (rte_eth_dev_get_name_by_port(p, name) != 0)
			continue;
		if (n < size)
			n += snprintf(buf + n, size - n, "%s%s", n ? ", " : "", name);
	}
	return n;
}

int shim_port_by_name(const char *name, uint16_t *port)
{
	return rte_eth_dev_get_port_by_name(name, port);
}

// shim_port_release stops the port and unplugs its device, which closes and
// releases the ethdev; a plain rte_eth_dev_close would leave the device probed,
// so the same name could neither be found nor probed again.
int shim_port_release(uint16_t port, uint16_t nb_rxq)
{
	struct rte_eth_dev_info di;
	struct rte_device *dev = NULL;
	struct rte_mbuf *m[64];
	if (rte_eth_dev_info_get(port, &di) == 0)
		dev = di.device;
	// Take back what waits in the receive queues before the mbuf pool goes:
	// net_ring keeps its rings across an unplug and a later probe of the same
	// name attaches to them, so an mbuf left there would outlive its pool.
	// Bounded, because a live NIC never runs dry.
	for (uint16_t q = 0; q < nb_rxq; q++) {
		for (int i = 0; i < 1024; i++) {
			uint16_t n = rte_eth_rx_burst(port, q, m, RTE_DIM(m));
			if (n == 0)
				break;
			rte_pktmbuf_free_bulk(m, n);
		}
	}
	int ret = rte_eth_dev_stop(port);
	if (dev != NULL && rte_dev_remove(dev) == 0)
		return ret;
	int ret2 = rte_eth_dev_close(port);
	return ret != 0 ? ret : ret2;
}

struct shim_rxq *shim_rxq_new(uint16_t port, uint16_t queue, int socket)
{
	struct shim_rxq *q = rte_zmalloc_socket("appliance_rxq", sizeof(*q), RTE_CACHE_LINE_SIZE, socket);
	if (q == NULL)
		return NULL;
	q->port = port;
	q->queue = queue;
	return q;
}

struct shim_txq *shim_txq_new(uint16_t port, uint16_t queue, int socket, struct rte_mempool *mp)
{
	struct shim_txq *q = rte_zmalloc_socket("appliance_txq", sizeof(*q), RTE_CACHE_LINE_SIZE, socket);
	if (q == NULL)
		return NULL;
	q->port = port;
	q->queue = queue;
	q->mp = mp;
	return q;
}

void shim_free(void *q) { rte_free(q); }

// Poller threads are Go threads, not EAL lcores, and a thread without an lcore
// id gets no mempool cache: every mbuf it allocates or frees (net_null and
// net_af_packet free transmitted mbufs one by one) is an atomic ring operation.
// So the first burst on a thread registers it as a non-EAL lcore. Registration
// only reads the thread's affinity, never sets it. When the thread exits its
// cached mbufs go back to their pools and the lcore id is released; while it
// lives it may keep up to 1.5 cache sizes of each pool, which the port's pool
// size allows for (SHIM_CACHE_THREADS threads).
static __thread int thread_state; // 0: not looked at, 1: done (with or without an lcore id)
static pthread_key_t thread_key;
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;

static void flush_cache(struct rte_mempool *mp, void *arg)
{
	struct rte_mempool_cache *c = rte_mempool_default_cache(mp, *(unsigned int *)arg);
	if (c != NULL)
		rte_mempool_cache_flush(c, mp);
}

static void thread_exit(void *arg)
{
	unsigned int lcore = rte_lcore_id();
	(void)arg;
	if (lcore == LCORE_ID_ANY)
		return;
	rte_mempool_walk(flush_cache, &lcore);
	rte_thread_unregister();
}

static void thread_key_init(void) { pthread_key_create(&thread_key, thread_exit); }

static void thread_register(void)
{
	thread_state = 1;
	if (rte_lcore_id() != LCORE_ID_ANY)
		return; // an EAL thread, or registered already
	pthread_once(&thread_key_once, thread_key_init);
	// Out of lcore ids the thread goes on without a cache, which is slower
	// but correct.
	if (rte_thread_register() == 0)
		pthread_setspecific(thread_key, (void *)1);
}

int shim_thread_lcore(void)
{
	if (unlikely(thread_state == 0))
		thread_register();
	unsigned int lcore = rte_lcore_id();
	return lcore == LCORE_ID_ANY ? -1 : (int)lcore;
}

static inline void copy_out(struct rte_mbuf *m, char *dst, uint32_t len)
{
	if (likely(m->nb_segs == 1)) {
		rte_memcpy(dst, rte_pktmbuf_mtod(m, const void *), len);
		return;
	}
	for (; m != NULL && len > 0; m = m->next) {
		uint32_t n = RTE_MIN((uint32_t)m->data_len, len);
		rte_memcpy(dst, rte_pktmbuf_mtod(m, const void *), n);
		dst += n;
		len -= n;
	}
}

// shim_rx receives up to nb packets and copies packet i into Go buffer
// dst[top-1-i]: Go keeps its spare buffers as a stack of which [0, top) are
// ready, so taking them from the top leaves the rest where they are.
// rx_begin receives a burst into q->mbufs for the receive calls below and
// prefetches its first packet's data.
static inline uint16_t rx_begin(struct shim_rxq *q, uint16_t nb)
{
	uint16_t n = rte_eth_rx_burst(q->port, q->queue, q->mbufs, nb);
	if (unlikely(thread_state == 0))
		thread_register();
	q->too_big = 0;
	if (n > 0)
		rte_prefetch0(rte_pktmbuf_mtod(q->mbufs[0], void *));
	return n;
}

uint16_t shim_rx(struct shim_rxq *q, uint16_t top, uint16_t nb)
{
	struct rte_mbuf **m = q->mbufs;
	uint16_t n = rx_begin(q, nb);
	uint16_t k = 0;
	if (n == 0)
		return 0;
	for (uint16_t i = 0; i < n; i++) {
		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(m[i + 1], void *));
		uint16_t slot = top - 1 - k;
		uint32_t len = m[i]->pkt_len;
		if (unlikely(len > q->room[slot])) {
			q->too_big++;
			continue;
		}
		copy_out(m[i], (char *)q->dst[slot], len);
		q->len[k] = len;
		q->hash[k] = (m[i]->ol_flags & RTE_MBUF_F_RX_RSS_HASH) ? m[i]->hash.rss : 0;
		k++;
	}
	rte_pktmbuf_free_bulk(m, n);
	return k;
}

// shim_rx_epb receives up to nb packets and writes each, its first snap
// bytes straight from the mbuf, as a pcapng Enhanced Packet Block of
// interface 0 stamped ts (the file's units) into out, in host byte order as
// the Go writer does; q->used is the bytes written, q->bytes the packets'
// lengths. out must hold nb blocks
// of 32 + snap rounded up to 4 bytes. One call per burst, no Go buffer per
// packet: a capture's whole per-packet work in the loop that frees the
// mbufs.
uint16_t shim_rx_epb(struct shim_rxq *q, uint16_t nb, uint32_t snap, uint64_t ts, char *out)
{
	struct rte_mbuf **m = q->mbufs;
	uint16_t n = rx_begin(q, nb);
	uint32_t off = 0;
	uint64_t sum = 0;
	q->used = 0;
	q->bytes = 0;
	if (n == 0)
		return 0;
	for (uint16_t i = 0; i < n; i++) {
		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(m[i + 1], void *));
		uint32_t len = m[i]->pkt_len;
		uint32_t cap = RTE_MIN(len, snap);
		uint32_t p = (28 + cap + 3) & ~3u;
		char *b = out + off;
		uint32_t h[7] = {6, p + 4, 0, (uint32_t)(ts >> 32), (uint32_t)ts, cap, len};
		// The padding first: the data then overwrites what of it it covers.
		*(unaligned_uint32_t *)(b + p - 4) = 0;
		memcpy(b, h, sizeof(h));
		copy_out(m[i], b + 28, cap);
		*(unaligned_uint32_t *)(b + p) = p + 4;
		off += p + 4;
		sum += len;
	}
	rte_pktmbuf_free_bulk(m, n);
	q->used = off;
	q->bytes = sum;
	return n;
}

// copy_stream copies n bytes, a multiple of 16, from src to dst (16-byte
// aligned) with non-temporal stores.
static inline __attribute__((always_inline)) void copy_stream(const char *src, char *dst, uint32_t n)
{
	for (uint32_t off = 0; off < n; off += 16)
		_mm_stream_si128((__m128i *)(dst + off), _mm_loadu_si128((const __m128i *)(src + off)));
}

// free_simple frees n received mbufs straight into their pool when each is
// a single direct segment of one pool that nothing else references (what a
// PMD's RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE assumes), and through
// rte_pktmbuf_free_bulk otherwise: the checks the latter makes per mbuf
// before it can put them back in bulk are most of its cost.
static inline __attribute__((always_inline)) void free_simple(struct rte_mbuf **m, uint16_t n)
{
	if (n == 0)
		return;
	struct rte_mempool *mp = m[0]->pool;
	int simple = 1;
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *x = m[i];
		simple &= (x->nb_segs == 1) & (x->next == NULL) & (rte_mbuf_refcnt_read(x) == 1) &
			  RTE_MBUF_DIRECT(x) & (x->pool == mp);
	}
	if (likely(simple))
		rte_mempool_put_bulk(mp, (void **)m, n);
	else
		rte_pktmbuf_free_bulk(m, n);
}

// shim_rx_slots receives up to nb packets, polling the PMD in bursts of
// burst until it has them or a burst comes back short, and copies packet i,
// its first stride bytes straight from the mbuf, to out + i*stride: slots of
// a capture arena. lens[i] is the bytes copied, wire[i] the packet's length
// and q->bytes the sum of those lengths. One call for several bursts when
// the queue is busy, so the Go side pays the cgo transition once per poll.
//
// When the slots are 16-byte aligned the copies are non-temporal stores,
// rounded up to 16 bytes (within the slot, and within the mbuf's buffer):
// an arena is written once and read only when the capture ends, so a normal
// store's read of each line before writing it (half the memory traffic) and
// the lines it evicts from the cache buy nothing. The fence at the end
// orders them before whatever the caller stores next.
uint16_t shim_rx_slots(struct shim_rxq *q, uint16_t nb, uint16_t burst, uint32_t stride, char *out,
		       uint16_t *lens, uint32_t *wire)
{
	struct rte_mbuf **m = q->mbufs;
	uint64_t sum = 0;
	uint16_t total = 0;
	int stream = ((uintptr_t)out & 15) == 0 && (stride & 15) == 0;
	if (unlikely(thread_state == 0))
		thread_register();
	q->too_big = 0;
	while (total < nb) {
		uint16_t want = RTE_MIN(burst, nb - total);
		uint16_t n = rte_eth_rx_burst(q->port, q->queue, m, want);
		for (uint16_t i = 0; i < n; i++) {
			uint32_t len = m[i]->pkt_len;
			uint32_t cap = RTE_MIN(len, stride);
			uint32_t whole = (cap + 15) & ~15u;
			if (stream && m[i]->nb_segs == 1 && (uint32_t)m[i]->data_off + whole <= m[i]->buf_len)
				copy_stream(rte_pktmbuf_mtod(m[i], const char *), out, whole);
			else
				copy_out(m[i], out, cap);
			out += stride;
			lens[total + i] = (uint16_t)cap;
			wire[total + i] = len;
			sum += len;
		}
		free_simple(m, n);
		total += n;
		if (n < want)
			break;
	}
	if (stream)
		_mm_sfence();
	q->bytes = sum;
	return total;
}

// shim_tx copies nb Go packets into fresh mbufs and transmits them; mbufs the
// device did not take are freed here, so the Go side only has to free the Go
// packets that were sent.
uint16_t shim_tx(struct shim_txq *q, uint16_t nb)
{
	struct rte_mbuf **m = q->mbufs;
	q->nombuf = 0;
	if (unlikely(thread_state == 0))
		thread_register();
	if (unlikely(rte_pktmbuf_alloc_bulk(q->mp, m, nb) != 0)) {
		// The bulk allocation is all or nothing: settle for what is left.
		unsigned int avail = rte_mempool_avail_count(q->mp);
		q->nombuf = 1;
		if (avail < nb)
			nb = avail;
		if (nb == 0 || rte_pktmbuf_alloc_bulk(q->mp, m, nb) != 0)
			return 0;
	}
	for (uint16_t i = 0; i < nb; i++) {
		uint32_t len = q->len[i];
		rte_memcpy(rte_pktmbuf_mtod(m[i], void *), (const void *)q->src[i], len);
		m[i]->data_len = (uint16_t)len;
		m[i]->pkt_len = len;
	}
	uint16_t sent = rte_eth_tx_burst(q->port, q->queue, m, nb);
	if (unlikely(sent < nb))
		rte_pktmbuf_free_bulk(&m[sent], nb - sent);
	return sent;
}


// shim_bench_parts is for BenchmarkReadSlotsParts only: it receives pkts
// packets on q in bursts of 32 and does with them, in one C loop (no Go, no
// cgo transition), one of the parts of ReadSlots' work, so that the
// benchmark can say where a copy's nanoseconds go:
//   0: receive, rte_pktmbuf_free_bulk (what testpmd --forward-mode=rxonly does)
//   1: receive, free_simple (ReadSlots' free)
//   2: receive, the non-temporal copy of the first stride bytes into the
//      next slot of arena, free_simple
//   3: shim_rx_slots itself, 256 packets a call as the dumper polls
//   4: no receive: non-temporal stores of stride zero bytes a packet into
//      the arena (what the memory takes for the copies' bytes alone)
// arena holds slots slots of stride bytes (16-byte aligned, a multiple of
// 16), lens and wire slots entries; the slots are used round.
uint64_t shim_bench_parts(struct shim_rxq *q, int part, uint64_t pkts, char *arena, uint64_t slots,
			  uint32_t stride, uint16_t *lens, uint32_t *wire)
{
	struct rte_mbuf **m = q->mbufs;
	uint64_t got = 0, i = 0;
	if (unlikely(thread_state == 0))
		thread_register();
	while (got < pkts) {
		if (i + 256 > slots)
			i = 0;
		char *out = arena + i * stride;
		uint16_t n;
		switch (part) {
		case 3:
			n = shim_rx_slots(q, 256, 32, stride, out, lens + i, wire + i);
			break;
		case 4:
			n = 32;
			for (uint16_t j = 0; j < n; j++, out += stride)
				for (uint32_t off = 0; off < stride; off += 16)
					_mm_stream_si128((__m128i *)(out + off), _mm_setzero_si128());
			_mm_sfence();
			break;
		default:
			n = rte_eth_rx_burst(q->port, q->queue, m, 32);
			if (part == 2) {
				for (uint16_t j = 0; j < n; j++, out += stride)
					copy_stream(rte_pktmbuf_mtod(m[j], const char *), out, stride);
				_mm_sfence();
			}
			if (part == 0)
				rte_pktmbuf_free_bulk(m, n);
			else
				free_simple(m, n);
		}
		i += n;
		got += n;
	}
	return got;
}
