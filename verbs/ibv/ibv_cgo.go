//go:build rdma && cgo

package ibv

/*
#cgo LDFLAGS: -libverbs
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <infiniband/verbs.h>

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
*/
import "C"

import (
	"fmt"
	"syscall"
	"unsafe"
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
