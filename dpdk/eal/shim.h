//go:build dpdk

// The C half of the eal driver. Everything that touches rte_eth_* or rte_mbuf
// lives here so that Go sees only plain structs of integers and arrays: DPDK's
// own structs carry bitfields, anonymous unions and alignment attributes that
// cgo cannot always lay out, and go-dpdk v0.0.8's ethdev package does not build
// against DPDK 22.11.

#ifndef APPLIANCE_EAL_SHIM_H
#define APPLIANCE_EAL_SHIM_H

#include <stdint.h>

#include <rte_mempool.h>

// The largest burst one RxBurst/TxBurst call moves; the per-queue arrays below
// are sized for it once, at open.
#define SHIM_MAX_BURST 512

// The per-lcore mempool cache of a port's mbuf pool, and how many poller
// threads' caches the pool size allows for.
#define SHIM_CACHE_SIZE 128
#define SHIM_CACHE_THREADS 16

// A receive queue's scratch space. Go writes dst/room (its buffers); C writes
// len/hash and the per-call drop count.
struct shim_rxq {
	uint16_t port;
	uint16_t queue;
	uint16_t too_big; // packets of the last burst dropped for being larger than their buffer
	uint16_t _pad;
	// What the last shim_rx_slots or shim_rx_epb burst received, in bytes
	// on the wire, and the bytes shim_rx_epb wrote. Fields, not out
	// pointers: a Go variable whose address goes to C escapes to the heap,
	// which would be an allocation per burst.
	uint64_t bytes;
	uint32_t used;
	uint32_t _pad2;
	uintptr_t dst[SHIM_MAX_BURST];  // data address of Go buffer i
	uint32_t room[SHIM_MAX_BURST];  // bytes that fit at dst[i]
	uint32_t len[SHIM_MAX_BURST];   // length of received packet i
	uint32_t hash[SHIM_MAX_BURST];  // RSS hash of packet i, 0 when the PMD gave none
	struct rte_mbuf *mbufs[SHIM_MAX_BURST];
};

// A transmit queue's scratch space. Go writes src/len; C allocates mbufs from mp.
struct shim_txq {
	uint16_t port;
	uint16_t queue;
	uint16_t nombuf; // 1 when the last burst found the mbuf pool short
	uint16_t _pad;
	struct rte_mempool *mp;
	uintptr_t src[SHIM_MAX_BURST];
	uint32_t len[SHIM_MAX_BURST];
	struct rte_mbuf *mbufs[SHIM_MAX_BURST];
};

struct shim_dev_info {
	char driver[64];
	uint16_t max_rx_queues;
	uint16_t max_tx_queues;
	uint16_t rx_desc_max, rx_desc_min;
	uint16_t tx_desc_max, tx_desc_min;
	uint64_t flow_type_rss_offloads;
	uint64_t rx_offload_capa;
	uint64_t tx_offload_capa;
	uint32_t if_index;
	int32_t socket;
	uint32_t min_rx_bufsize;
	uint32_t max_rx_pktlen;
};

struct shim_port_info {
	uint8_t mac[6];
	uint16_t mtu;
	uint32_t speed_mbps;
	int link_up;
};

struct shim_stats {
	uint64_t ipackets, opackets, ibytes, obytes;
	uint64_t imissed, ierrors, oerrors, rx_nombuf;
};

int shim_errno(void);
int shim_thread_lcore(void);
int shim_dev_info(uint16_t port, struct shim_dev_info *out);
int shim_configure(uint16_t port, uint16_t nb_rxq, uint16_t nb_txq, uint64_t rss_hf,
		   uint64_t rx_offloads, uint64_t tx_offloads);
int shim_queues_setup(uint16_t port, uint16_t nb_rxq, uint16_t nb_txq, uint16_t *nb_rxd,
		      uint16_t *nb_txd, int socket, struct rte_mempool *mp, uint64_t tx_offloads);
int shim_port_info(uint16_t port, struct shim_port_info *out);
int shim_stats_get(uint16_t port, struct shim_stats *out);
int shim_port_names(char *buf, int size);
int shim_port_by_name(const char *name, uint16_t *port);
int shim_port_release(uint16_t port, uint16_t nb_rxq);

struct shim_rxq *shim_rxq_new(uint16_t port, uint16_t queue, int socket);
struct shim_txq *shim_txq_new(uint16_t port, uint16_t queue, int socket, struct rte_mempool *mp);
void shim_free(void *q);

uint16_t shim_rx(struct shim_rxq *q, uint16_t top, uint16_t nb);
uint16_t shim_tx(struct shim_txq *q, uint16_t nb);
uint16_t shim_rx_epb(struct shim_rxq *q, uint16_t nb, uint32_t snap, uint64_t ts, char *out);
uint16_t shim_rx_slots(struct shim_rxq *q, uint16_t nb, uint16_t burst, uint32_t stride, char *out,
		       uint16_t *lens, uint32_t *wire);
uint64_t shim_bench_parts(struct shim_rxq *q, int part, uint64_t pkts, char *arena, uint64_t slots,
			  uint32_t stride, uint16_t *lens, uint32_t *wire);

#endif
