// The ns-3 peer of the fabric simulator's benchmark: the same fat-tree and
// the same flows, in Debian's ns-3 (3.37), so `make bench` can print how
// much faster bench/fabric simulates the same traffic.
//
// Topology: the k-ary fat-tree of internal/topo.FatTree, built in the
// same order (hosts, then tors, aggs and cores; links host-tor, tor-agg,
// agg-core), so ns-3 node i is topo node i and host i is "h<i>".
// Point-to-point links of one rate and delay, drop-tail device queues and
// no queue disc (a switch port is a FIFO; there is no PFC, no ECN and no
// DCQCN in stock ns-3). Global routing with ECMP: ns-3.37 offers only
// per-packet random spraying over equal-cost routes (RandomEcmpRouting),
// not per-flow hashing, so TCP sees some reordering.
//
// Traffic: the flows of a CSV file as bench/fabric/workload.WriteCSV
// writes it (columns by name: src, dst, size, start_ns; src and dst are
// host indices), each a TCP BulkSend of its size to a PacketSink on the
// destination.
//
// Output: one line on stdout,
//   ns3 k=4 hosts=16 flows=N sim_ns=... rx_packets=... hops=... rx_bytes=... setup_ns=... wall_ns=...
// where rx_packets counts packets (data and ACKs) received by host
// devices, hops counts packets received by any device (one per link
// traversal, the figure bench/fabric reports as packet hops), rx_bytes the
// payload bytes the sinks received, and wall_ns the wall-clock time of
// Simulator::Run alone (setup_ns: building the network and routes).

#include "ns3/boolean.h"
#include "ns3/bulk-send-helper.h"
#include "ns3/command-line.h"
#include "ns3/config.h"
#include "ns3/data-rate.h"
#include "ns3/inet-socket-address.h"
#include "ns3/internet-stack-helper.h"
#include "ns3/ipv4-address-helper.h"
#include "ns3/ipv4-global-routing-helper.h"
#include "ns3/ipv4-interface-container.h"
#include "ns3/net-device-container.h"
#include "ns3/node-container.h"
#include "ns3/nstime.h"
#include "ns3/packet-sink-helper.h"
#include "ns3/packet-sink.h"
#include "ns3/point-to-point-helper.h"
#include "ns3/point-to-point-net-device.h"
#include "ns3/queue-size.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/traffic-control-helper.h"
#include "ns3/uinteger.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace ns3;

namespace
{

uint64_t g_hostRx = 0; // packets received by host devices
uint64_t g_hops = 0;   // packets received by any device

void
CountHostRx(Ptr<const Packet>)
{
    g_hostRx++;
    g_hops++;
}

void
CountSwitchRx(Ptr<const Packet>)
{
    g_hops++;
}

struct Flow
{
    uint32_t src, dst;
    uint64_t size;
    int64_t startNs;
};

std::vector<std::string>
SplitCsv(const std::string& line)
{
    std::vector<std::string> out;
    std::string field;
    std::istringstream in(line);
    while (std::getline(in, field, ','))
    {
        // Trim blanks and a CR from files written on other systems.
        size_t a = field.find_first_not_of(" \t\r");
        size_t b = field.find_last_not_of(" \t\r");
        out.push_back(a == std::string::npos ? "" : field.substr(a, b - a + 1));
    }
    return out;
}

// ReadFlows parses the CSV or exits with a message naming the line.
std::vector<Flow>
ReadFlows(const std::string& path, uint32_t nHosts)
{
    std::ifstream in(path);
    if (!in)
    {
        std::cerr << "fattree: cannot open flows file " << path << "\n";
        std::exit(2);
    }
    std::string line;
    if (!std::getline(in, line))
    {
        std::cerr << "fattree: " << path << ": empty, want a header line\n";
        std::exit(2);
    }
    std::vector<std::string> header = SplitCsv(line);
    int col[4] = {-1, -1, -1, -1};
    const char* names[4] = {"src", "dst", "size", "start_ns"};
    for (size_t i = 0; i < header.size(); i++)
    {
        for (int j = 0; j < 4; j++)
        {
            if (header[i] == names[j])
            {
                col[j] = static_cast<int>(i);
            }
        }
    }
    for (int j = 0; j < 4; j++)
    {
        if (col[j] < 0)
        {
            std::cerr << "fattree: " << path << ":1: no " << names[j] << " column\n";
            std::exit(2);
        }
    }
    std::vector<Flow> flows;
    for (int lineNo = 2; std::getline(in, line); lineNo++)
    {
        if (line.empty() || line == "\r")
        {
            continue;
        }
        std::vector<std::string> f = SplitCsv(line);
        if (f.size() != header.size())
        {
            std::cerr << "fattree: " << path << ":" << lineNo << ": " << f.size() << " fields, want "
                      << header.size() << "\n";
            std::exit(2);
        }
        Flow fl;
        try
        {
            fl.src = static_cast<uint32_t>(std::stoul(f[col[0]]));
            fl.dst = static_cast<uint32_t>(std::stoul(f[col[1]]));
            fl.size = std::stoull(f[col[2]]);
            fl.startNs = std::stoll(f[col[3]]);
        }
        catch (const std::exception&)
        {
            std::cerr << "fattree: " << path << ":" << lineNo << ": not a flow: " << line << "\n";
            std::exit(2);
        }
        if (fl.src >= nHosts || fl.dst >= nHosts || fl.src == fl.dst || fl.size == 0 || fl.startNs < 0)
        {
            std::cerr << "fattree: " << path << ":" << lineNo << ": flow " << fl.src << " -> " << fl.dst
                      << " of " << fl.size << " bytes at " << fl.startNs << " ns does not fit a fat-tree of "
                      << nHosts << " hosts\n";
            std::exit(2);
        }
        flows.push_back(fl);
    }
    return flows;
}

} // namespace

int
main(int argc, char* argv[])
{
    uint32_t k = 4;
    uint64_t bps = 100000000000ULL;
    uint64_t delayNs = 1000;
    uint64_t durationNs = 10000000;
    uint32_t queuePkts = 1000;
    uint32_t mss = 1448;
    bool ecmp = true;
    std::string flowsPath;

    CommandLine cmd(__FILE__);
    cmd.AddValue("k", "fat-tree arity (even)", k);
    cmd.AddValue("bps", "link rate, bit/s", bps);
    cmd.AddValue("delay_ns", "link propagation delay, ns", delayNs);
    cmd.AddValue("duration_ns", "simulated time to run, ns", durationNs);
    cmd.AddValue("flows", "flow CSV (workload.WriteCSV)", flowsPath);
    cmd.AddValue("queue_pkts", "drop-tail queue per device, packets", queuePkts);
    cmd.AddValue("mss", "TCP segment size, bytes", mss);
    cmd.AddValue("ecmp", "spray packets over equal-cost routes (per packet)", ecmp);
    cmd.Parse(argc, argv);
    if (k < 2 || k % 2 != 0 || k > 64 || flowsPath.empty() || bps == 0 || durationNs == 0)
    {
        std::cerr << "fattree: want --k=EVEN (2..64) --flows=FILE, a positive --bps and --duration_ns\n";
        return 2;
    }

    auto setupStart = std::chrono::steady_clock::now();
    const uint32_t half = k / 2;
    const uint32_t nHosts = k * k * k / 4, nEdge = k * half, nCore = half * half;
    std::vector<Flow> flows = ReadFlows(flowsPath, nHosts);

    // TCP tuned for a datacenter rather than the internet: full-size
    // segments, buffers above the bandwidth-delay product, and a minimum
    // RTO of 1 ms instead of 1 s, without which one loss stalls a flow for
    // the whole run.
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(mss));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(4 << 20));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(4 << 20));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(MilliSeconds(1)));
    Config::SetDefault("ns3::TcpSocketBase::ClockGranularity", TimeValue(MicroSeconds(1)));
    Config::SetDefault("ns3::Ipv4GlobalRouting::RandomEcmpRouting", BooleanValue(ecmp));

    NodeContainer hosts, tors, aggs, cores;
    hosts.Create(nHosts);
    tors.Create(nEdge);
    aggs.Create(nEdge);
    cores.Create(nCore);
    NodeContainer all(hosts, tors, aggs, cores);
    InternetStackHelper stack;
    stack.Install(all);

    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", DataRateValue(DataRate(bps)));
    p2p.SetChannelAttribute("Delay", TimeValue(NanoSeconds(delayNs)));
    p2p.SetQueue("ns3::DropTailQueue<Packet>",
                 "MaxSize",
                 QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, queuePkts)));

    Ipv4AddressHelper addr;
    addr.SetBase("10.0.0.0", "255.255.255.252");
    TrafficControlHelper tch;
    std::vector<Ipv4Address> hostAddr(nHosts);
    auto connect = [&](Ptr<Node> a, Ptr<Node> b) {
        NetDeviceContainer d = p2p.Install(a, b);
        Ipv4InterfaceContainer ifs = addr.Assign(d);
        addr.NewNetwork();
        // Assign installs a default queue disc; a switch port here is the
        // device's drop-tail FIFO alone.
        tch.Uninstall(d);
        return ifs;
    };
    for (uint32_t h = 0; h < nHosts; h++)
    {
        hostAddr[h] = connect(hosts.Get(h), tors.Get(h / half)).GetAddress(0);
    }
    for (uint32_t t = 0; t < nEdge; t++)
    {
        uint32_t pod = t / half;
        for (uint32_t j = 0; j < half; j++)
        {
            connect(tors.Get(t), aggs.Get(pod * half + j));
        }
    }
    for (uint32_t a = 0; a < nEdge; a++)
    {
        uint32_t j = a % half;
        for (uint32_t c = 0; c < half; c++)
        {
            connect(aggs.Get(a), cores.Get(j * half + c));
        }
    }
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    // Count every packet every device receives: one per link traversal.
    for (uint32_t n = 0; n < all.GetN(); n++)
    {
        Ptr<Node> node = all.Get(n);
        for (uint32_t i = 0; i < node->GetNDevices(); i++)
        {
            Ptr<PointToPointNetDevice> dev = DynamicCast<PointToPointNetDevice>(node->GetDevice(i));
            if (dev)
            {
                dev->TraceConnectWithoutContext("PhyRxEnd",
                                                MakeCallback(n < nHosts ? &CountHostRx : &CountSwitchRx));
            }
        }
    }

    const uint16_t port = 9;
    PacketSinkHelper sinkHelper("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), port));
    ApplicationContainer sinks = sinkHelper.Install(hosts);
    sinks.Start(Seconds(0));
    for (const Flow& f : flows)
    {
        BulkSendHelper bulk("ns3::TcpSocketFactory", InetSocketAddress(hostAddr[f.dst], port));
        bulk.SetAttribute("MaxBytes", UintegerValue(f.size));
        bulk.SetAttribute("SendSize", UintegerValue(64 << 10));
        ApplicationContainer app = bulk.Install(hosts.Get(f.src));
        app.Start(NanoSeconds(f.startNs));
    }

    Simulator::Stop(NanoSeconds(durationNs));
    auto runStart = std::chrono::steady_clock::now();
    Simulator::Run();
    auto runEnd = std::chrono::steady_clock::now();
    int64_t simNs = Simulator::Now().GetNanoSeconds();

    uint64_t rxBytes = 0;
    for (uint32_t i = 0; i < sinks.GetN(); i++)
    {
        rxBytes += DynamicCast<PacketSink>(sinks.Get(i))->GetTotalRx();
    }
    auto ns = [](auto d) {
        return static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
    };
    std::printf("ns3 k=%u hosts=%u flows=%zu sim_ns=%lld rx_packets=%llu hops=%llu rx_bytes=%llu "
                "setup_ns=%lld wall_ns=%lld\n",
                k,
                nHosts,
                flows.size(),
                static_cast<long long>(simNs),
                static_cast<unsigned long long>(g_hostRx),
                static_cast<unsigned long long>(g_hops),
                static_cast<unsigned long long>(rxBytes),
                ns(runStart - setupStart),
                ns(runEnd - runStart));
    std::fflush(stdout);
    Simulator::Destroy();
    return 0;
}
