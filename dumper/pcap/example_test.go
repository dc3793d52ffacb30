package pcap_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/rdma-appliance/appliance/dumper/pcap"
)

// A trace written to memory and read back. Nanosecond timestamps keep
// the order of packets a few nanoseconds apart, which microseconds would
// lose; the snap length keeps only the headers of a full-size frame while
// the record remembers its length on the wire.
func ExampleWriter() {
	var trace bytes.Buffer
	w, err := pcap.NewWriter(&trace, pcap.WriterOptions{LinkType: pcap.LinkTypeEthernet, Nanosecond: true, SnapLen: 128})
	if err != nil {
		log.Fatal(err)
	}
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	ack := make([]byte, 62)
	write := make([]byte, 1082)
	if err := w.WritePacket(t0+100, write, len(write)); err != nil {
		log.Fatal(err)
	}
	if err := w.WritePacket(t0+107, ack, len(ack)); err != nil {
		log.Fatal(err)
	}
	// Nothing reaches the buffer before Flush or Close.
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}

	r, err := pcap.NewReader(&trace)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	fmt.Println(r.Format(), "nanosecond:", r.Nanosecond())
	var rec pcap.Record
	for {
		err := r.Next(&rec)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s captured %d of %d bytes\n", rec.Time().UTC().Format(time.RFC3339Nano), rec.CapLen, rec.OrigLen)
	}
	// Output:
	// pcap nanosecond: true
	// 2024-05-01T12:00:00.0000001Z captured 128 of 1082 bytes
	// 2024-05-01T12:00:00.000000107Z captured 62 of 62 bytes
}

// pcapng keeps what classic pcap cannot: the interface's name and a
// comment on a packet.
func ExampleWriter_pcapng() {
	var trace bytes.Buffer
	w, err := pcap.NewWriter(&trace, pcap.WriterOptions{Format: pcap.FormatPcapNG, LinkType: pcap.LinkTypeEthernet,
		InterfaceName: "mirror0"})
	if err != nil {
		log.Fatal(err)
	}
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	if err := w.WritePacketOpts(t0+1, make([]byte, 60), 60, pcap.PacketOptions{Comment: "injected drop"}); err != nil {
		log.Fatal(err)
	}
	if err := w.WritePacket(t0+2, make([]byte, 1082), 1082); err != nil {
		log.Fatal(err)
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}

	r, err := pcap.NewReader(&trace)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	fmt.Println(r.Format())
	var rec pcap.Record
	for {
		err := r.Next(&rec)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		// Interfaces grows as the reader meets their descriptions, which
		// come before the packets that name them.
		ifc := r.Interfaces()[rec.Interface]
		fmt.Printf("%s on %s: %d bytes %q\n", rec.Time().UTC().Format(time.RFC3339Nano), ifc.Name, rec.CapLen, rec.Comment)
	}
	// Output:
	// pcapng
	// 2024-05-01T12:00:00.000000001Z on mirror0: 60 bytes "injected drop"
	// 2024-05-01T12:00:00.000000002Z on mirror0: 1082 bytes ""
}
