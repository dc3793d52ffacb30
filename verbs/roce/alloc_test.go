package roce

import "testing"

func TestZeroAllocs(t *testing.T) {
	vs := loadVectors(t)
	exp := expected()
	var p Packet
	buf := make([]byte, 8192)
	bad := append([]byte(nil), vs[0].frame...)
	bad[14] = 0x44
	wrongPort := append([]byte(nil), vs[0].frame...)
	wrongPort[37] = 0xb8
	write := v4Base()
	write.Opcode, write.VA, write.RKey, write.DMALen = RCWriteOnly, 0x1000, 1, 4096
	v6 := exp["UD SEND_ONLY_IMM v6"].b
	v6.UDPChecksum = true
	payload := make([]byte, 4096)
	ackFrame := vs[6].frame
	corrupt := append([]byte(nil), ackFrame...)
	corrupt[len(corrupt)-1] ^= 1
	var tmpl Builder
	cases := map[string]func(){
		"Parse": func() {
			for _, v := range vs {
				_ = Parse(v.frame, &p)
			}
		},
		"ParseTruncated": func() { _ = ParseTruncated(vs[2].frame[:70], UDPPort, &p) },
		"ParseErrors": func() {
			_ = Parse(bad, &p)
			_ = Parse(wrongPort, &p)
			_ = Parse(vs[0].frame[:40], &p)
		},
		"Build":        func() { _, _ = write.Build(buf, payload) },
		"BuildIPv6":    func() { _, _ = v6.Build(buf, []byte("probe")) },
		"BuildInPlace": func() { _, _ = write.BuildInPlace(buf, 1024) },
		"BuildCNP":     func() { _, _ = write.BuildCNP(buf) },
		"ICRC": func() {
			_ = Parse(ackFrame, &p)
			_ = p.ComputeICRC(ackFrame)
			_ = p.VerifyICRC(ackFrame)
			_, _ = ICRC(ackFrame[14 : len(ackFrame)-4])
		},
		"VerifyICRCMismatch": func() {
			_ = Parse(ackFrame, &p)
			_ = p.VerifyICRC(corrupt)
		},
		"FromPacket": func() {
			_ = Parse(ackFrame, &p)
			tmpl.FromPacket(ackFrame, &p)
		},
		"OpcodeInfo": func() { _ = OpcodeInfo(RCWriteOnlyImm).Offset(HeaderImmDt) },
	}
	for name, fn := range cases {
		if n := testing.AllocsPerRun(200, fn); n != 0 {
			t.Errorf("%s: %v allocs per run", name, n)
		}
	}
}
