// netlab's packet-level referee: ring all-reduce jobs on a fabric, run packet by packet in ns-3 (3.37).
//
// Reads one scenario (JSON written by netlab.validate.scenario), writes every job's iteration start times
// and the run's drop / mark / retransmission-timeout counts, in all and per job (JSON). What it models, and
// what not, is in netlab/validate/README.md; the Python side checks the scenario before writing it.
//
//   referee SCENARIO.json OUTPUT.json
//
// Jobs: one rank per host, ranks in ring order; flow k goes from rank k to rank k+1 along the path the
// scenario gives (netlab's own route, so ECMP is per flow: every flow has its own destination address on
// its receiver and static host routes along its path; everything else, e.g. ACKs, uses global routing).
// An all-reduce is `steps` ring steps of `chunk_bytes` each: a rank sends step s once it is in its
// all-reduce and has received step s-1 from its predecessor, and is done when it has received all steps.
// A rank's iteration: compute (jittered per job and iteration, all ranks alike), its all-reduce starts
// `compute - hidden + intra` after the iteration start (overlap with compute, serial intra-host phase
// first), the iteration ends when both compute and all-reduce are done. Rank 0's iteration starts are the
// job's. The run stops when every job has started `iterations` + 1 iterations (jobs keep running past
// their own count until then, so contention holds to the end). With "sequential": true, jobs run one
// at a time instead (each alone, for its own `iterations`, the next 1 ms after every rank of the
// previous one finished; offsets ignored): every job's iteration alone, in one run.
//
// Transports: "reno", "cubic", "dctcp" (ns-3's TcpLinuxReno, TcpCubic, TcpDctcp over persistent
// connections) and "dcqcn": a rate-based, go-back-N transport over UDP with DCQCN's reaction point
// (rate cuts on congestion notification packets, fast recovery, additive and hyper increase).
// Switch egress queues: FIFO of `switch_queue_packets`, marking ECN-capable arrivals at
// `ecn_threshold_packets` or more queued for dctcp and dcqcn. Host NICs: a FIFO of `host_queue_packets`.

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <nlohmann/json.hpp>

#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace ns3;
using json = nlohmann::json;

namespace
{

constexpr uint16_t kPort = 5000;
constexpr uint32_t kTcpSegment = 1448;    // payload of a 1500-byte packet with TCP timestamps
constexpr uint32_t kRateHeader = 12;      // the rate transport's own header (sequence, length, flags)
constexpr uint32_t kRatePayload = 1460;   // data bytes per rate-transport packet: 1460 + 12 + 8 + 20 = 1500
constexpr uint32_t kControlBytes = 16;    // CNP / ACK / NACK payload

struct Settings
{
    std::string transport;
    uint32_t switchQueuePackets = 1000;
    uint32_t hostQueuePackets = 10000;
    uint32_t ecnThresholdPackets = 20;
    double minRtoS = 0.2;
    uint32_t tcpBufferBytes = 4 << 20;
    double maxSimS = 600.0;
    uint64_t seed = 1;
    // DCQCN reaction point (rates as fractions of the sender's line rate, times in seconds)
    double dcqcnTimerS = 300e-6;       // rate-increase timer T
    double dcqcnAlphaTimerS = 300e-6;  // alpha-decay timer K
    double dcqcnCnpIntervalS = 200e-6; // CNPs per flow at most this often; rate cut at most this often
    double dcqcnG = 1.0 / 16;
    double dcqcnByteCounter = 150e3;   // bytes per byte-counter stage B
    uint32_t dcqcnF = 5;
    double dcqcnAi = 0.01;
    double dcqcnHai = 0.1;
    double dcqcnMinRate = 0.001;
    double dcqcnRtoS = 0.05;
};

Settings g_cfg;

// ------------------------------------------------------------------------------------------------- stats
struct Counters
{
    uint64_t rtos = 0;            // TCP: entries into CA_LOSS (retransmission timeouts)
    uint64_t fastRecoveries = 0;  // TCP: entries into CA_RECOVERY
    uint64_t cnps = 0;            // dcqcn: congestion notifications sent
    uint64_t nacks = 0;           // dcqcn: go-back-N requests sent
    uint64_t rateTimeouts = 0;    // dcqcn: sender timeouts (tail loss)
    uint64_t retransmittedBytes = 0;
};

Counters g_count;

// One job's share of the losses, summed over its flows (data one way, ACKs and control packets the other):
// what a model of the loss tail needs per job, not per scenario.
struct JobLoss
{
    uint64_t drops = 0;               // its data packets dropped by a queue disc (switch egress; host queues never
                                      // drop)
    uint64_t ackDrops = 0;            // its packets the other way (ACKs, CNPs, NACKs) dropped
    uint64_t ecnMarks = 0;            // its packets marked CE by a switch queue (dctcp, dcqcn)
    uint64_t retransmits = 0;         // data packets sent again (TCP: segments; dcqcn: go-back-N resends)
    uint64_t retransmittedBytes = 0;  // their payload bytes
    uint64_t rtos = 0;                // TCP: entries into CA_LOSS (retransmission timeouts)
    uint64_t fastRecoveries = 0;      // TCP: entries into CA_RECOVERY
    uint64_t cnps = 0;                // dcqcn: congestion notifications its receivers sent
    uint64_t nacks = 0;               // dcqcn: go-back-N requests its receivers sent
    uint64_t rateTimeouts = 0;        // dcqcn: sender timeouts (tail loss)

    json ToJson() const
    {
        return {{"drops", drops},
                {"ack_drops", ackDrops},
                {"ecn_marks", ecnMarks},
                {"retransmits", retransmits},
                {"retransmitted_bytes", retransmittedBytes},
                {"rtos", rtos},
                {"fast_recoveries", fastRecoveries},
                {"cnps", cnps},
                {"nacks", nacks},
                {"rate_timeouts", rateTimeouts}};
    }
};

void
OnCongState(JobLoss* loss, TcpSocketState::TcpCongState_t, TcpSocketState::TcpCongState_t now)
{
    if (now == TcpSocketState::CA_LOSS)
    {
        g_count.rtos++;
        loss->rtos++;
    }
    else if (now == TcpSocketState::CA_RECOVERY)
    {
        g_count.fastRecoveries++;
        loss->fastRecoveries++;
    }
}

// ns-3.37's DCTCP sets ssthresh to cwnd x (1 - alpha/2) with no floor, so on a link whose bandwidth-delay
// product is a few packets (these scaled-down fabrics) cwnd falls below one segment and the flow waits for
// the RTO; Linux's dctcp_ssthresh keeps at least 2 segments, as this does.
class TcpDctcpFloor : public TcpDctcp
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("netlab::TcpDctcpFloor")
                                .SetParent<TcpDctcp>()
                                .AddConstructor<TcpDctcpFloor>()
                                .SetGroupName("Internet");
        return tid;
    }

    uint32_t GetSsThresh(Ptr<const TcpSocketState> tcb, uint32_t bytesInFlight) override
    {
        return std::max(TcpDctcp::GetSsThresh(tcb, bytesInFlight), 2 * tcb->m_segmentSize);
    }

    Ptr<TcpCongestionOps> Fork() override
    {
        return CopyObject<TcpDctcpFloor>(this);
    }
};

// ------------------------------------------------------------------------------------------------- ranks
struct Job;

// One rank: the sending end of its flow to the next rank and the receiving end of the previous one's.
struct Rank
{
    Job* job = nullptr;
    uint32_t index = 0;
    uint64_t chunksSent = 0;      // ring steps handed to the transport, over all iterations
    uint64_t bytesReceived = 0;   // in order, from the predecessor, over all iterations
    uint64_t chunksReceived = 0;
    uint64_t iteration = 0;       // the current iteration (0-based)
    bool inAllReduce = false;
    bool allReduceDone = false;
    bool computeDone = false;
    // set by the transport
    std::function<void(uint64_t)> send;  // queue more bytes on the outgoing flow
    // "trace" runs only: when each ring step was handed to the transport (this rank's flow) and when each
    // arrived whole (the predecessor's flow), and the predecessor's flow's in-order bytes per time bin
    std::vector<double> stepSentS, stepReceivedS;
    std::vector<uint64_t> bytesPerBin;

    void StartIteration();
    void ComputeDone();
    void StartAllReduce();
    void OnBytes(uint64_t n);
    void TrySteps();
    void MaybeEndIteration();
};

struct Job
{
    int64_t id = 0;
    uint32_t steps = 0;
    uint64_t chunkBytes = 0;
    double computeS = 0, hiddenS = 0, intraS = 0, offsetS = 0, jitter = 0;
    uint64_t iterations = 0;
    JobLoss loss;
    size_t order = 0;          // position in the scenario
    size_t ranksFinished = 0;  // sequential runs: ranks past their last iteration
    std::vector<std::unique_ptr<Rank>> ranks;
    std::vector<double> starts;          // rank 0's iteration starts
    std::vector<double> computeOfIter;   // jittered compute, one draw per iteration for all ranks
    std::mt19937_64 rng;
    std::normal_distribution<double> normal{0.0, 1.0};

    double Compute(uint64_t k)
    {
        while (computeOfIter.size() <= k)
        {
            double c = computeS * (1.0 + jitter * normal(rng));
            computeOfIter.push_back(std::max(0.0, c));
        }
        return computeOfIter[k];
    }
};

std::vector<std::unique_ptr<Job>> g_jobs;
size_t g_jobsDone = 0;
bool g_sequential = false;              // each job alone: the next starts once every rank of one has finished
double g_traceBinS = 0.0;               // > 0: a "trace" run (per-flow steps and bytes, per-queue bins); 0: none

// The time bin of now, the bins vector grown to hold it.
size_t
TraceBin(std::vector<uint64_t>& bins)
{
    size_t b = static_cast<size_t>(Simulator::Now().GetSeconds() / g_traceBinS);
    if (bins.size() <= b)
    {
        bins.resize(b + 1, 0);
    }
    return b;
}
constexpr double kSequentialGapS = 1e-3;  // quiet time between two jobs of a sequential run

void
Rank::StartIteration()
{
    inAllReduce = allReduceDone = computeDone = false;
    double now = Simulator::Now().GetSeconds();
    if (index == 0)
    {
        job->starts.push_back(now);
        if (job->starts.size() == job->iterations + 1 && ++g_jobsDone == g_jobs.size())
        {
            Simulator::Stop();
        }
    }
    if (g_sequential && iteration >= job->iterations)
    {
        if (++job->ranksFinished == job->ranks.size() && job->order + 1 < g_jobs.size())
        {
            for (auto& rank : g_jobs[job->order + 1]->ranks)
            {
                Simulator::Schedule(Seconds(kSequentialGapS), &Rank::StartIteration, rank.get());
            }
        }
        return;
    }
    double compute = job->Compute(iteration);
    double netStart = std::max(0.0, compute - job->hiddenS) + job->intraS;
    Simulator::Schedule(Seconds(compute), &Rank::ComputeDone, this);
    Simulator::Schedule(Seconds(netStart), &Rank::StartAllReduce, this);
}

void
Rank::ComputeDone()
{
    computeDone = true;
    MaybeEndIteration();
}

void
Rank::StartAllReduce()
{
    inAllReduce = true;
    TrySteps();
}

void
Rank::OnBytes(uint64_t n)
{
    bytesReceived += n;
    uint64_t got = bytesReceived / job->chunkBytes;
    if (g_traceBinS > 0)
    {
        bytesPerBin[TraceBin(bytesPerBin)] += n;
        stepReceivedS.resize(got, Simulator::Now().GetSeconds());
    }
    if (got != chunksReceived)
    {
        chunksReceived = got;
        TrySteps();
    }
}

// Send every step that is allowed now; finish the all-reduce once every step of this iteration arrived.
void
Rank::TrySteps()
{
    if (!inAllReduce || allReduceDone)
    {
        return;
    }
    uint64_t base = iteration * job->steps;
    uint64_t received = chunksReceived > base ? std::min<uint64_t>(chunksReceived - base, job->steps) : 0;
    uint64_t allowed = base + std::min<uint64_t>(job->steps, received + 1);
    if (chunksSent < allowed)
    {
        uint64_t n = allowed - chunksSent;
        chunksSent = allowed;
        if (g_traceBinS > 0)
        {
            stepSentS.resize(chunksSent, Simulator::Now().GetSeconds());
        }
        send(n * job->chunkBytes);
    }
    if (received == job->steps)
    {
        allReduceDone = true;
        MaybeEndIteration();
    }
}

void
Rank::MaybeEndIteration()
{
    if (computeDone && allReduceDone)
    {
        iteration++;
        StartIteration();
    }
}

// ------------------------------------------------------------------------------------------------- TCP
// The sending end of a persistent TCP connection: bytes the rank queued are written as the socket takes them.
struct TcpSender
{
    Ptr<Socket> socket;
    JobLoss* loss = nullptr;
    uint64_t pending = 0;
    bool connected = false;
    bool sentData = false;
    SequenceNumber32 highestStart;  // the highest first sequence number of a data segment sent so far

    void Queue(uint64_t n)
    {
        pending += n;
        Push();
    }

    void Push()
    {
        if (!connected)
        {
            return;
        }
        while (pending > 0)
        {
            uint32_t room = socket->GetTxAvailable();
            if (room == 0)
            {
                return;
            }
            uint32_t n = static_cast<uint32_t>(std::min<uint64_t>({pending, room, 1u << 16}));
            int sent = socket->Send(Create<Packet>(n));
            if (sent <= 0)
            {
                return;
            }
            pending -= static_cast<uint64_t>(sent);
        }
    }
};

struct TcpReceiver
{
    Rank* rank = nullptr;
    Ptr<Socket> listener;
    std::vector<Ptr<Socket>> accepted;

    void OnRecv(Ptr<Socket> s)
    {
        Ptr<Packet> p;
        uint64_t n = 0;
        while ((p = s->Recv()))
        {
            n += p->GetSize();
        }
        if (n)
        {
            rank->OnBytes(n);
        }
    }

    void OnAccept(Ptr<Socket> s, const Address&)
    {
        accepted.push_back(s);
        s->SetRecvCallback(MakeCallback(&TcpReceiver::OnRecv, this));
    }
};

std::vector<std::unique_ptr<TcpSender>> g_tcpSenders;
std::vector<std::unique_ptr<TcpReceiver>> g_tcpReceivers;

void
TcpConnected(TcpSender* self, Ptr<Socket>)
{
    self->connected = true;
    self->Push();
}

void
TcpSendRoom(TcpSender* self, Ptr<Socket>, uint32_t)
{
    self->Push();
}

int g_debugFlow = -1;  // NETLAB_REFEREE_DEBUG=k: trace TCP connection k's cwnd, state and RTO on stderr
int g_tcpConnections = 0;

void
DebugCwnd(uint32_t, uint32_t now)
{
    std::cerr << Simulator::Now().GetSeconds() << " cwnd " << now << std::endl;
}

void
DebugState(TcpSocketState::TcpCongState_t, TcpSocketState::TcpCongState_t now)
{
    std::cerr << Simulator::Now().GetSeconds() << " state " << TcpSocketState::TcpCongStateName[now] << std::endl;
}

void
DebugRto(Time, Time now)
{
    std::cerr << Simulator::Now().GetSeconds() << " rto " << now.GetSeconds() << std::endl;
}

// TcpSocketBase's "Tx" trace (every segment handed to IP, its payload without the header): new data always
// starts above every segment sent before, so a data segment starting at or below one sent before is a
// retransmission (fast retransmit, SACK recovery or after an RTO alike).
void
OnTcpTx(TcpSender* s, Ptr<const Packet> payload, const TcpHeader& header, Ptr<const TcpSocketBase>)
{
    if (payload->GetSize() == 0 || (header.GetFlags() & (TcpHeader::SYN | TcpHeader::FIN)))
    {
        return;
    }
    SequenceNumber32 seq = header.GetSequenceNumber();
    if (s->sentData && seq <= s->highestStart)
    {
        s->loss->retransmits++;
        s->loss->retransmittedBytes += payload->GetSize();
        return;
    }
    s->sentData = true;
    s->highestStart = seq;
}

void
ConnectTcp(TcpSender* s, Ptr<Node> node, Address to)
{
    s->socket = Socket::CreateSocket(node, TcpSocketFactory::GetTypeId());
    s->socket->TraceConnectWithoutContext("CongState", MakeBoundCallback(&OnCongState, s->loss));
    s->socket->TraceConnectWithoutContext("Tx", MakeBoundCallback(&OnTcpTx, s));
    if (g_tcpConnections++ == g_debugFlow)
    {
        s->socket->TraceConnectWithoutContext("CongestionWindow", MakeCallback(&DebugCwnd));
        s->socket->TraceConnectWithoutContext("CongState", MakeCallback(&DebugState));
        s->socket->TraceConnectWithoutContext("RTO", MakeCallback(&DebugRto));
    }
    s->socket->Bind();
    s->socket->SetConnectCallback(MakeBoundCallback(&TcpConnected, s), MakeNullCallback<void, Ptr<Socket>>());
    s->socket->SetSendCallback(MakeBoundCallback(&TcpSendRoom, s));
    s->socket->Connect(to);
}

// ------------------------------------------------------------------------------------------------- dcqcn
// A rate-based transport standing for RoCEv2 with DCQCN: data packets paced at the current rate, the
// receiver (notification point) returns a CNP for a CE-marked packet at most once per interval, the
// sender (reaction point) cuts and recovers its rate as DCQCN does; losses are repaired by go-back-N
// (a NACK from the receiver at the first gap, a sender timeout for a lost tail). No PFC: see README.md.
class RateTag : public Tag
{
  public:
    enum Kind : uint8_t
    {
        DATA = 0,
        CNP = 1,
        ACK = 2,
        NACK = 3
    };

    uint8_t kind = DATA;
    uint8_t last = 0;  // DATA: no more data queued behind this packet (ask for an ACK)
    uint64_t seq = 0;  // DATA: first byte; ACK / NACK: next byte expected
    uint32_t len = 0;

    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("netlab::RateTag").SetParent<Tag>().AddConstructor<RateTag>();
        return tid;
    }

    TypeId GetInstanceTypeId() const override
    {
        return GetTypeId();
    }

    uint32_t GetSerializedSize() const override
    {
        return 14;
    }

    void Serialize(TagBuffer b) const override
    {
        b.WriteU8(kind);
        b.WriteU8(last);
        b.WriteU64(seq);
        b.WriteU32(len);
    }

    void Deserialize(TagBuffer b) override
    {
        kind = b.ReadU8();
        last = b.ReadU8();
        seq = b.ReadU64();
        len = b.ReadU32();
    }

    void Print(std::ostream& os) const override
    {
        os << "kind=" << int(kind) << " seq=" << seq << " len=" << len;
    }
};

// ------------------------------------------------------------------------------------------------- queues
// A FIFO that marks ECN-capable packets arriving to `MarkThreshold` or more queued packets (DCTCP's step
// marking on the instantaneous queue) and drops only when full. Unlike ns-3's RED, a packet that is not
// ECN-capable (a pure ACK) is queued rather than dropped above the threshold. The rate transport's control
// packets (CNP, ACK, NACK) go ahead of data, as RoCE switches give CNPs their own high-priority class.
class StepEcnQueueDisc : public QueueDisc
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid =
            TypeId("netlab::StepEcnQueueDisc")
                .SetParent<QueueDisc>()
                .AddConstructor<StepEcnQueueDisc>()
                .AddAttribute("MaxSize", "The queue's limit", QueueSizeValue(QueueSize("1000p")),
                              MakeQueueSizeAccessor(&QueueDisc::SetMaxSize, &QueueDisc::GetMaxSize),
                              MakeQueueSizeChecker())
                .AddAttribute("MarkThreshold", "Packets queued from which arrivals are marked", UintegerValue(20),
                              MakeUintegerAccessor(&StepEcnQueueDisc::m_threshold),
                              MakeUintegerChecker<uint32_t>());
        return tid;
    }

    StepEcnQueueDisc()
        : QueueDisc(QueueDiscSizePolicy::MULTIPLE_QUEUES)
    {
    }

  private:
    uint32_t m_threshold = 20;

    bool DoEnqueue(Ptr<QueueDiscItem> item) override
    {
        if (GetCurrentSize() + item > GetMaxSize())
        {
            DropBeforeEnqueue(item, "Queue full");
            return false;
        }
        RateTag tag;
        if (item->GetPacket()->PeekPacketTag(tag) && tag.kind != RateTag::DATA)
        {
            return GetInternalQueue(0)->Enqueue(item);
        }
        if (GetInternalQueue(1)->GetNPackets() >= m_threshold)
        {
            Mark(item, "Above the step threshold");  // false (and nothing done) for a packet that is not ECT
        }
        return GetInternalQueue(1)->Enqueue(item);
    }

    Ptr<QueueDiscItem> DoDequeue() override
    {
        Ptr<QueueDiscItem> item = GetInternalQueue(0)->Dequeue();
        return item ? item : GetInternalQueue(1)->Dequeue();
    }

    bool CheckConfig() override
    {
        if (GetNQueueDiscClasses() > 0 || GetNPacketFilters() > 0)
        {
            return false;
        }
        while (GetNInternalQueues() < 2)  // control, then data; each as large as the whole
        {
            AddInternalQueue(CreateObjectWithAttributes<DropTailQueue<QueueDiscItem>>(
                "MaxSize", QueueSizeValue(GetMaxSize())));
        }
        return GetNInternalQueues() == 2;
    }

    void InitializeParams() override
    {
    }
};

struct RateSender
{
    Ptr<Socket> socket;
    JobLoss* loss = nullptr;
    Address to;
    double lineBps = 0;
    double rc = 0, rt = 0, alpha = 1.0;
    uint64_t sndUna = 0, sndNxt = 0, sndMax = 0, highSent = 0;
    uint32_t timerStage = 0, byteStage = 0;
    double bytesSinceStage = 0;
    bool cnpSinceAlphaTimer = false;
    double lastCut = -1e9;
    double lastSendS = -1e9, lastWireBits = 0;  // pacing: the next packet leaves lastWireBits / rc after it
    EventId sendEvent, increaseEvent, alphaEvent, rtoEvent;

    void Init(double bps)
    {
        lineBps = rc = rt = bps;
    }

    void Queue(uint64_t n)
    {
        sndMax += n;
        if (!sendEvent.IsRunning())
        {
            SendOne();
        }
        ArmRto();
    }

    void SendOne()
    {
        if (sndNxt >= sndMax)
        {
            return;
        }
        uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(kRatePayload, sndMax - sndNxt));
        Ptr<Packet> p = Create<Packet>(len + kRateHeader);
        RateTag tag;
        tag.kind = RateTag::DATA;
        tag.seq = sndNxt;
        tag.len = len;
        tag.last = (sndNxt + len >= sndMax) ? 1 : 0;
        p->AddPacketTag(tag);
        socket->SendTo(p, 0, to);
        if (sndNxt < highSent)
        {
            g_count.retransmittedBytes += len;
            loss->retransmits++;
            loss->retransmittedBytes += len;
        }
        sndNxt += len;
        highSent = std::max(highSent, sndNxt);
        bytesSinceStage += len;
        if (bytesSinceStage >= g_cfg.dcqcnByteCounter)
        {
            bytesSinceStage = 0;
            byteStage++;
            Increase();
        }
        lastSendS = Simulator::Now().GetSeconds();
        lastWireBits = (len + kRateHeader + 8 + 20 + 2) * 8.0;  // UDP, IP, PPP
        sendEvent = Simulator::Schedule(Seconds(lastWireBits / rc), &RateSender::SendOne, this);
    }

    // The rate changed: the next packet leaves one packet time at the new rate after the last one.
    void Repace()
    {
        if (!sendEvent.IsRunning())
        {
            return;
        }
        double wait = std::max(0.0, lastSendS + lastWireBits / rc - Simulator::Now().GetSeconds());
        sendEvent.Cancel();
        sendEvent = Simulator::Schedule(Seconds(wait), &RateSender::SendOne, this);
    }

    void Increase()
    {
        uint32_t hi = std::max(timerStage, byteStage), lo = std::min(timerStage, byteStage);
        if (hi >= g_cfg.dcqcnF)
        {
            if (lo > g_cfg.dcqcnF)
            {
                rt += (lo - g_cfg.dcqcnF) * g_cfg.dcqcnHai * lineBps;  // hyper increase
            }
            else
            {
                rt += g_cfg.dcqcnAi * lineBps;  // additive increase
            }
        }
        rt = std::min(rt, lineBps);
        rc = std::min((rt + rc) / 2.0, lineBps);  // fast recovery towards the target
        Repace();
        if (rc < lineBps && !increaseEvent.IsRunning())
        {
            increaseEvent = Simulator::Schedule(Seconds(g_cfg.dcqcnTimerS), &RateSender::OnIncreaseTimer, this);
        }
    }

    void OnIncreaseTimer()
    {
        timerStage++;
        Increase();
        if (rc < lineBps && !increaseEvent.IsRunning())
        {
            increaseEvent = Simulator::Schedule(Seconds(g_cfg.dcqcnTimerS), &RateSender::OnIncreaseTimer, this);
        }
    }

    void OnAlphaTimer()
    {
        if (!cnpSinceAlphaTimer)
        {
            alpha *= (1.0 - g_cfg.dcqcnG);
        }
        cnpSinceAlphaTimer = false;
        if (alpha > 1e-4)
        {
            alphaEvent = Simulator::Schedule(Seconds(g_cfg.dcqcnAlphaTimerS), &RateSender::OnAlphaTimer, this);
        }
    }

    void OnCnp()
    {
        cnpSinceAlphaTimer = true;
        double now = Simulator::Now().GetSeconds();
        alpha = (1.0 - g_cfg.dcqcnG) * alpha + g_cfg.dcqcnG;
        if (!alphaEvent.IsRunning())
        {
            alphaEvent = Simulator::Schedule(Seconds(g_cfg.dcqcnAlphaTimerS), &RateSender::OnAlphaTimer, this);
        }
        if (now - lastCut < g_cfg.dcqcnCnpIntervalS)
        {
            return;
        }
        lastCut = now;
        rt = rc;
        rc = std::max(rc * (1.0 - alpha / 2.0), g_cfg.dcqcnMinRate * lineBps);
        timerStage = byteStage = 0;
        bytesSinceStage = 0;
        increaseEvent.Cancel();
        increaseEvent = Simulator::Schedule(Seconds(g_cfg.dcqcnTimerS), &RateSender::OnIncreaseTimer, this);
        Repace();
    }

    void ArmRto()
    {
        rtoEvent.Cancel();
        if (sndUna < sndMax)
        {
            rtoEvent = Simulator::Schedule(Seconds(g_cfg.dcqcnRtoS), &RateSender::OnRto, this);
        }
    }

    void OnRto()
    {
        if (sndUna >= sndMax)
        {
            return;
        }
        g_count.rateTimeouts++;
        loss->rateTimeouts++;
        GoBack(sndUna);
        ArmRto();
    }

    void GoBack(uint64_t to)
    {
        sndNxt = to;
        if (!sendEvent.IsRunning())
        {
            SendOne();
        }
    }

    void OnControl(Ptr<Socket> s)
    {
        Ptr<Packet> p;
        Address from;
        while ((p = s->RecvFrom(from)))
        {
            RateTag tag;
            if (!p->PeekPacketTag(tag))
            {
                continue;
            }
            if (tag.kind == RateTag::CNP)
            {
                OnCnp();
            }
            else if (tag.kind == RateTag::ACK || tag.kind == RateTag::NACK)
            {
                if (tag.seq > sndUna)
                {
                    sndUna = tag.seq;
                    ArmRto();
                }
                if (tag.kind == RateTag::NACK && tag.seq < sndNxt)
                {
                    GoBack(tag.seq);
                }
            }
        }
    }
};

struct RateReceiver
{
    Rank* rank = nullptr;
    Ptr<Socket> socket;
    uint64_t expected = 0;
    uint64_t nackedAt = UINT64_MAX;
    double lastCnp = -1e9;
    uint32_t sinceAck = 0;

    void Reply(const Address& to, uint8_t kind, uint64_t seq)
    {
        Ptr<Packet> p = Create<Packet>(kControlBytes);
        RateTag tag;
        tag.kind = kind;
        tag.seq = seq;
        p->AddPacketTag(tag);
        socket->SendTo(p, 0, to);
    }

    void OnRecv(Ptr<Socket> s)
    {
        Ptr<Packet> p;
        Address from;
        uint64_t delivered = 0;
        while ((p = s->RecvFrom(from)))
        {
            RateTag tag;
            SocketIpTosTag tos;
            if (!p->PeekPacketTag(tag) || tag.kind != RateTag::DATA)
            {
                continue;
            }
            double now = Simulator::Now().GetSeconds();
            if (p->PeekPacketTag(tos) && (tos.GetTos() & 0x3) == 0x3 && now - lastCnp >= g_cfg.dcqcnCnpIntervalS)
            {
                lastCnp = now;
                g_count.cnps++;
                rank->job->loss.cnps++;
                Reply(from, RateTag::CNP, 0);
            }
            if (tag.seq == expected)
            {
                expected += tag.len;
                delivered += tag.len;
                nackedAt = UINT64_MAX;
                if (++sinceAck >= 16 || tag.last)
                {
                    sinceAck = 0;
                    Reply(from, RateTag::ACK, expected);
                }
            }
            else if (tag.seq > expected && nackedAt != expected)
            {
                nackedAt = expected;
                g_count.nacks++;
                rank->job->loss.nacks++;
                Reply(from, RateTag::NACK, expected);
            }
            else if (tag.seq < expected && tag.last)
            {
                Reply(from, RateTag::ACK, expected);  // a retransmitted tail we already have
            }
        }
        if (delivered)
        {
            rank->OnBytes(delivered);
        }
    }
};

std::vector<std::unique_ptr<RateSender>> g_rateSenders;
std::vector<std::unique_ptr<RateReceiver>> g_rateReceivers;

// ------------------------------------------------------------------------------------------------- loss per job
// Every flow has its own address on its receiver (RouteFlow): its data packets go to it, its ACKs and control
// packets come from it, so a queued packet's IP header names its job.
std::map<uint32_t, JobLoss*> g_lossOfAddress;

// The job whose flow a queued packet belongs to (or null), and whether it goes the data's way.
JobLoss*
LossOf(Ptr<const QueueDiscItem> item, bool* data)
{
    Ptr<const Ipv4QueueDiscItem> ip = DynamicCast<const Ipv4QueueDiscItem>(item);
    if (!ip)
    {
        return nullptr;
    }
    auto it = g_lossOfAddress.find(ip->GetHeader().GetDestination().Get());
    *data = it != g_lossOfAddress.end();
    if (!*data)
    {
        it = g_lossOfAddress.find(ip->GetHeader().GetSource().Get());
    }
    return it != g_lossOfAddress.end() ? it->second : nullptr;
}

uint64_t g_unattributedDrops = 0, g_unattributedMarks = 0;  // packets of no job's flow (none expected)

void
OnQueueDrop(Ptr<const QueueDiscItem> item)
{
    bool data = false;
    JobLoss* loss = LossOf(item, &data);
    (loss ? (data ? loss->drops : loss->ackDrops) : g_unattributedDrops)++;
}

void
OnQueueMark(Ptr<const QueueDiscItem> item, const char*)
{
    bool data = false;
    JobLoss* loss = LossOf(item, &data);
    (loss ? loss->ecnMarks : g_unattributedMarks)++;
}

// A "trace" run's record of one switch egress queue, per time bin: bytes sent on (the link's load), packets
// arriving, the sum and the largest of the queue lengths they found (packets), and ECN marks.
struct QueueTrace
{
    Ptr<QueueDisc> queue;
    std::vector<uint64_t> bytes, arrivals, queuedSum, queuedMax, marks;

    void OnEnqueue(Ptr<const QueueDiscItem>)
    {
        size_t b = TraceBin(arrivals);
        TraceBin(queuedSum);
        TraceBin(queuedMax);
        uint64_t q = queue->GetNPackets();  // the arrival itself included
        arrivals[b]++;
        queuedSum[b] += q;
        queuedMax[b] = std::max(queuedMax[b], q);
    }

    void OnDequeue(Ptr<const QueueDiscItem> item)
    {
        bytes[TraceBin(bytes)] += item->GetSize();
    }

    void OnMark(Ptr<const QueueDiscItem>, const char*)
    {
        marks[TraceBin(marks)]++;
    }
};

std::vector<std::unique_ptr<QueueTrace>> g_queueTraces;

// ------------------------------------------------------------------------------------------------- topology
struct LinkEnd
{
    uint32_t ifIndex;     // at this node
    Ipv4Address peer;     // the other end's address on this link
};

struct Fabric
{
    NodeContainer nodes;
    std::map<std::string, uint32_t> index;
    std::vector<bool> isHost;
    std::map<std::pair<uint32_t, uint32_t>, LinkEnd> ends;  // (from node, to node) -> egress at `from`
    std::map<std::pair<uint32_t, uint32_t>, Ptr<QueueDisc>> egress;
    std::vector<Ptr<PointToPointNetDevice>> devices;
    std::map<std::pair<uint32_t, uint32_t>, double> rateBps;
};

[[noreturn]] void
Fail(const std::string& what)
{
    std::cerr << "referee: " << what << std::endl;
    std::exit(2);
}

uint32_t
NodeOf(const Fabric& f, const std::string& name, const std::string& where)
{
    auto it = f.index.find(name);
    if (it == f.index.end())
    {
        Fail(where + ": unknown node '" + name + "'");
    }
    return it->second;
}

void
SetTransportDefaults()
{
    const std::string& t = g_cfg.transport;
    std::string socketType;
    if (t == "reno")
    {
        socketType = "ns3::TcpLinuxReno";
    }
    else if (t == "cubic")
    {
        socketType = "ns3::TcpCubic";
    }
    else if (t == "dctcp")
    {
        TcpDctcpFloor::GetTypeId();  // registers the type before it is looked up by name
        socketType = "netlab::TcpDctcpFloor";
        // ns-3.37's PRR, entered on every ECN echo, shrinks cwnd below one segment while the sender is
        // application-limited (a ring step ends), after which every step waits for the RTO: classic
        // recovery sets cwnd to DCTCP's reduced ssthresh at once instead.
        Config::SetDefault("ns3::TcpL4Protocol::RecoveryType", TypeIdValue(TcpClassicRecovery::GetTypeId()));
    }
    else if (t != "dcqcn")
    {
        Fail("transport must be reno, cubic, dctcp or dcqcn, not '" + t + "'");
    }
    if (!socketType.empty())
    {
        Config::SetDefault("ns3::TcpL4Protocol::SocketType", StringValue(socketType));
    }
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(kTcpSegment));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(g_cfg.tcpBufferBytes));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(g_cfg.tcpBufferBytes));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(Seconds(g_cfg.minRtoS)));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocket::TcpNoDelay", BooleanValue(true));  // as gloo and NCCL set it
    // Linux's delayed-ACK timeout is 40 ms at least (TCP_DELACK_MIN), usually that in a data centre; ns-3's
    // default of 200 ms equals the minimum RTO, so a lone segment in flight waits for a timeout
    Config::SetDefault("ns3::TcpSocket::DelAckTimeout", TimeValue(MilliSeconds(40)));
}

Fabric
BuildFabric(const json& sc)
{
    Fabric f;
    const json& nodes = sc.at("nodes");
    f.nodes.Create(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i)
    {
        f.index[nodes[i].at("name").get<std::string>()] = i;
        f.isHost.push_back(nodes[i].at("host").get<bool>());
    }
    InternetStackHelper stack;
    stack.Install(f.nodes);

    const bool ecn = g_cfg.transport == "dctcp" || g_cfg.transport == "dcqcn";
    std::string swLimit = std::to_string(g_cfg.switchQueuePackets) + "p";
    TrafficControlHelper hostTc, switchTc;
    hostTc.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize",
                            QueueSizeValue(QueueSize(std::to_string(g_cfg.hostQueuePackets) + "p")));
    if (ecn)
    {
        StepEcnQueueDisc::GetTypeId();  // registers the type before the helper looks it up by name
        switchTc.SetRootQueueDisc("netlab::StepEcnQueueDisc", "MaxSize", QueueSizeValue(QueueSize(swLimit)),
                                  "MarkThreshold", UintegerValue(g_cfg.ecnThresholdPackets));
    }
    else
    {
        switchTc.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", QueueSizeValue(QueueSize(swLimit)));
    }

    const json& links = sc.at("links");
    for (size_t i = 0; i < links.size(); ++i)
    {
        const json& l = links[i];
        std::string where = "links[" + std::to_string(i) + "]";
        uint32_t a = NodeOf(f, l.at("a").get<std::string>(), where);
        uint32_t b = NodeOf(f, l.at("b").get<std::string>(), where);
        double bps = l.at("rate_bps").get<double>();
        PointToPointHelper p2p;
        p2p.SetDeviceAttribute("DataRate", DataRateValue(DataRate(static_cast<uint64_t>(bps))));
        p2p.SetChannelAttribute("Delay", TimeValue(Seconds(l.at("delay_s").get<double>())));
        // One packet in the device: queueing happens in the queue disc above it (flow control stops it).
        p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", QueueSizeValue(QueueSize("1p")));
        NetDeviceContainer devs = p2p.Install(f.nodes.Get(a), f.nodes.Get(b));
        // Queue discs before addresses, or Ipv4AddressHelper installs ns-3's default (fq_codel).
        QueueDiscContainer qa = (f.isHost[a] ? hostTc : switchTc).Install(devs.Get(0));
        QueueDiscContainer qb = (f.isHost[b] ? hostTc : switchTc).Install(devs.Get(1));
        Ipv4AddressHelper addr;
        uint32_t base = (10u << 24) + (static_cast<uint32_t>(i) << 2);
        addr.SetBase(Ipv4Address(base), Ipv4Mask("255.255.255.252"));
        Ipv4InterfaceContainer ifs = addr.Assign(devs);
        Ptr<Ipv4> ipa = f.nodes.Get(a)->GetObject<Ipv4>();
        Ptr<Ipv4> ipb = f.nodes.Get(b)->GetObject<Ipv4>();
        f.ends[{a, b}] = LinkEnd{static_cast<uint32_t>(ipa->GetInterfaceForDevice(devs.Get(0))), ifs.GetAddress(1)};
        f.ends[{b, a}] = LinkEnd{static_cast<uint32_t>(ipb->GetInterfaceForDevice(devs.Get(1))), ifs.GetAddress(0)};
        f.devices.push_back(DynamicCast<PointToPointNetDevice>(devs.Get(0)));
        f.devices.push_back(DynamicCast<PointToPointNetDevice>(devs.Get(1)));
        f.egress[{a, b}] = qa.Get(0);
        f.egress[{b, a}] = qb.Get(0);
        f.rateBps[{a, b}] = f.rateBps[{b, a}] = bps;
    }
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();
    return f;
}

// The flow's own destination address on its receiver, with host routes along its path.
Ipv4Address
RouteFlow(Fabric& f, const json& path, uint32_t flowNumber, const std::string& where)
{
    if (path.size() < 2)
    {
        Fail(where + ": a path needs at least two nodes");
    }
    Ipv4Address alias((11u << 24) + flowNumber + 1);
    std::vector<uint32_t> hops;
    for (const auto& n : path)
    {
        hops.push_back(NodeOf(f, n.get<std::string>(), where));
    }
    Ipv4StaticRoutingHelper helper;
    for (size_t h = 0; h + 1 < hops.size(); ++h)
    {
        auto it = f.ends.find({hops[h], hops[h + 1]});
        if (it == f.ends.end())
        {
            Fail(where + ": no link between consecutive path nodes");
        }
        Ptr<Ipv4> ip = f.nodes.Get(hops[h])->GetObject<Ipv4>();
        helper.GetStaticRouting(ip)->AddHostRouteTo(alias, it->second.peer, it->second.ifIndex);
    }
    // The receiver owns the alias on the interface the flow arrives on.
    auto last = f.ends.find({hops.back(), hops[hops.size() - 2]});
    Ptr<Ipv4> ip = f.nodes.Get(hops.back())->GetObject<Ipv4>();
    ip->AddAddress(last->second.ifIndex, Ipv4InterfaceAddress(alias, Ipv4Mask("255.255.255.255")));
    return alias;
}

void
BuildJobs(Fabric& f, const json& sc)
{
    uint32_t flowNumber = 0;
    const json& jobs = sc.at("jobs");
    for (size_t j = 0; j < jobs.size(); ++j)
    {
        const json& jj = jobs[j];
        std::string where = "jobs[" + std::to_string(j) + "]";
        auto job = std::make_unique<Job>();
        job->id = jj.at("id").get<int64_t>();
        job->steps = jj.at("steps").get<uint32_t>();
        job->chunkBytes = jj.at("chunk_bytes").get<uint64_t>();
        job->computeS = jj.at("compute_s").get<double>();
        job->hiddenS = jj.at("hidden_s").get<double>();
        job->intraS = jj.at("intra_s").get<double>();
        job->offsetS = jj.at("offset_s").get<double>();
        job->jitter = jj.at("jitter").get<double>();
        job->iterations = jj.at("iterations").get<uint64_t>();
        job->rng.seed(g_cfg.seed * 1000003ull + static_cast<uint64_t>(job->id));
        const json& hosts = jj.at("hosts");
        const json& paths = jj.at("paths");
        uint32_t n = hosts.size();
        if (n < 2 || paths.size() != n || job->steps == 0 || job->chunkBytes == 0 || job->iterations == 0)
        {
            Fail(where + ": need >= 2 hosts, one path per ring flow, steps, chunk_bytes and iterations > 0");
        }
        for (uint32_t r = 0; r < n; ++r)
        {
            auto rank = std::make_unique<Rank>();
            rank->job = job.get();
            rank->index = r;
            job->ranks.push_back(std::move(rank));
        }
        for (uint32_t r = 0; r < n; ++r)
        {
            // flow r: rank r -> rank r+1
            Rank* src = job->ranks[r].get();
            Rank* dst = job->ranks[(r + 1) % n].get();
            std::string fw = where + ".paths[" + std::to_string(r) + "]";
            const json& path = paths[r];
            if (path.front().get<std::string>() != hosts[r].get<std::string>() ||
                path.back().get<std::string>() != hosts[(r + 1) % n].get<std::string>())
            {
                Fail(fw + ": must run from hosts[r] to hosts[r+1]");
            }
            Ipv4Address alias = RouteFlow(f, path, flowNumber++, fw);
            g_lossOfAddress[alias.Get()] = &job->loss;
            uint32_t srcNode = NodeOf(f, path.front().get<std::string>(), fw);
            uint32_t dstNode = NodeOf(f, path.back().get<std::string>(), fw);
            Address to = InetSocketAddress(alias, kPort);
            if (g_cfg.transport == "dcqcn")
            {
                auto rx = std::make_unique<RateReceiver>();
                rx->rank = dst;
                rx->socket = Socket::CreateSocket(f.nodes.Get(dstNode), UdpSocketFactory::GetTypeId());
                rx->socket->Bind(to);
                rx->socket->SetIpRecvTos(true);
                rx->socket->SetRecvCallback(MakeCallback(&RateReceiver::OnRecv, rx.get()));
                auto tx = std::make_unique<RateSender>();
                tx->socket = Socket::CreateSocket(f.nodes.Get(srcNode), UdpSocketFactory::GetTypeId());
                tx->socket->Bind();
                tx->socket->SetRecvCallback(MakeCallback(&RateSender::OnControl, tx.get()));
                InetSocketAddress ect(alias, kPort);
                ect.SetTos(0x02);  // ECT(0): switches mark instead of dropping (SendTo takes the address's TOS)
                tx->to = ect;
                tx->Init(f.rateBps.at({srcNode, NodeOf(f, path[1].get<std::string>(), fw)}));
                tx->loss = &job->loss;
                RateSender* t = tx.get();
                src->send = [t](uint64_t bytes) { t->Queue(bytes); };
                g_rateReceivers.push_back(std::move(rx));
                g_rateSenders.push_back(std::move(tx));
            }
            else
            {
                auto rx = std::make_unique<TcpReceiver>();
                rx->rank = dst;
                rx->listener = Socket::CreateSocket(f.nodes.Get(dstNode), TcpSocketFactory::GetTypeId());
                rx->listener->Bind(to);
                rx->listener->Listen();
                rx->listener->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                                MakeCallback(&TcpReceiver::OnAccept, rx.get()));
                auto tx = std::make_unique<TcpSender>();
                TcpSender* t = tx.get();
                t->loss = &job->loss;
                src->send = [t](uint64_t bytes) { t->Queue(bytes); };
                // Connect at t = 0, not before Run(): traffic control is not set up before (ns3-facts.md).
                Simulator::Schedule(Seconds(0), &ConnectTcp, t, f.nodes.Get(srcNode), to);
                g_tcpReceivers.push_back(std::move(rx));
                g_tcpSenders.push_back(std::move(tx));
            }
        }
        job->order = g_jobs.size();
        if (!g_sequential || job->order == 0)
        {
            for (auto& rank : job->ranks)
            {
                Simulator::Schedule(Seconds(g_sequential ? 0.0 : job->offsetS), &Rank::StartIteration, rank.get());
            }
        }
        g_jobs.push_back(std::move(job));
    }
}

template <typename T>
T
Get(const json& j, const char* key, T fallback)
{
    return j.contains(key) ? j.at(key).get<T>() : fallback;
}

}  // namespace

int
main(int argc, char* argv[])
{
    if (argc != 3)
    {
        std::cerr << "usage: referee SCENARIO.json OUTPUT.json" << std::endl;
        return 2;
    }
    // Die with the process that started us (NETLAB_REFEREE_PARENT: its pid), however it dies.
    if (const char* parent = std::getenv("NETLAB_REFEREE_PARENT"))
    {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (std::to_string(getppid()) != parent)
        {
            return 3;  // it died before the line above took effect
        }
    }
    auto wall0 = std::chrono::steady_clock::now();
    if (const char* debug = std::getenv("NETLAB_REFEREE_DEBUG"))
    {
        g_debugFlow = std::atoi(debug);
    }
    json sc;
    try
    {
        std::ifstream in(argv[1]);
        if (!in)
        {
            Fail(std::string("cannot read ") + argv[1]);
        }
        in >> sc;
        const json& t = sc.at("transport");
        g_cfg.transport = t.at("name").get<std::string>();
        g_cfg.switchQueuePackets = Get<uint32_t>(t, "switch_queue_packets", g_cfg.switchQueuePackets);
        g_cfg.hostQueuePackets = Get<uint32_t>(t, "host_queue_packets", g_cfg.hostQueuePackets);
        g_cfg.ecnThresholdPackets = Get<uint32_t>(t, "ecn_threshold_packets", g_cfg.ecnThresholdPackets);
        g_cfg.minRtoS = Get<double>(t, "min_rto_s", g_cfg.minRtoS);
        g_cfg.tcpBufferBytes = Get<uint32_t>(t, "tcp_buffer_bytes", g_cfg.tcpBufferBytes);
        g_cfg.dcqcnTimerS = Get<double>(t, "dcqcn_timer_s", g_cfg.dcqcnTimerS);
        g_cfg.dcqcnAlphaTimerS = Get<double>(t, "dcqcn_alpha_timer_s", g_cfg.dcqcnAlphaTimerS);
        g_cfg.dcqcnCnpIntervalS = Get<double>(t, "dcqcn_cnp_interval_s", g_cfg.dcqcnCnpIntervalS);
        g_cfg.dcqcnG = Get<double>(t, "dcqcn_g", g_cfg.dcqcnG);
        g_cfg.dcqcnByteCounter = Get<double>(t, "dcqcn_byte_counter", g_cfg.dcqcnByteCounter);
        g_cfg.dcqcnF = Get<uint32_t>(t, "dcqcn_f", g_cfg.dcqcnF);
        g_cfg.dcqcnAi = Get<double>(t, "dcqcn_ai", g_cfg.dcqcnAi);
        g_cfg.dcqcnHai = Get<double>(t, "dcqcn_hai", g_cfg.dcqcnHai);
        g_cfg.dcqcnMinRate = Get<double>(t, "dcqcn_min_rate", g_cfg.dcqcnMinRate);
        g_cfg.dcqcnRtoS = Get<double>(t, "dcqcn_rto_s", g_cfg.dcqcnRtoS);
        g_cfg.maxSimS = Get<double>(sc, "max_sim_s", g_cfg.maxSimS);
        g_cfg.seed = Get<uint64_t>(sc, "seed", g_cfg.seed);
        g_sequential = Get<bool>(sc, "sequential", false);
        g_traceBinS = sc.contains("trace") ? sc.at("trace").at("bin_s").get<double>() : 0.0;
        RngSeedManager::SetSeed(static_cast<uint32_t>(g_cfg.seed % 4294967291u) + 1);
        SetTransportDefaults();
        Fabric fabric = BuildFabric(sc);
        BuildJobs(fabric, sc);
        for (auto& [key, q] : fabric.egress)
        {
            q->TraceConnectWithoutContext("Drop", MakeCallback(&OnQueueDrop));
            q->TraceConnectWithoutContext("Mark", MakeCallback(&OnQueueMark));
            if (g_traceBinS > 0 && !fabric.isHost[key.first])
            {
                auto t = std::make_unique<QueueTrace>();
                t->queue = q;
                q->TraceConnectWithoutContext("Enqueue", MakeCallback(&QueueTrace::OnEnqueue, t.get()));
                q->TraceConnectWithoutContext("Dequeue", MakeCallback(&QueueTrace::OnDequeue, t.get()));
                q->TraceConnectWithoutContext("Mark", MakeCallback(&QueueTrace::OnMark, t.get()));
                g_queueTraces.push_back(std::move(t));
            }
        }

        Simulator::Stop(Seconds(g_cfg.maxSimS));
        Simulator::Run();
        double simS = Simulator::Now().GetSeconds();

        json out;
        out["version"] = 2;  // 2: per-job "loss" counters
        out["completed"] = g_jobsDone == g_jobs.size();
        out["sim_s"] = simS;
        json jobs = json::array();
        for (auto& j : g_jobs)
        {
            jobs.push_back({{"id", j->id}, {"starts", j->starts}, {"loss", j->loss.ToJson()}});
        }
        out["jobs"] = jobs;
        uint64_t drops = 0, marks = 0, dequeued = 0;
        json dropsByLink = json::array();
        std::vector<std::string> names(fabric.nodes.GetN());
        for (const auto& [name, i] : fabric.index)
        {
            names[i] = name;
        }
        for (auto& [key, q] : fabric.egress)
        {
            const QueueDisc::Stats& s = q->GetStats();
            drops += s.nTotalDroppedPackets;
            marks += s.nTotalMarkedPackets;
            dequeued += s.nTotalDequeuedPackets;
            if (s.nTotalDroppedPackets || s.nTotalMarkedPackets)
            {
                dropsByLink.push_back({names[key.first], names[key.second], s.nTotalDroppedPackets,
                                       s.nTotalMarkedPackets});
            }
        }
        uint64_t deviceDrops = 0;  // below the queue discs: flow control should keep these at 0
        for (auto& d : fabric.devices)
        {
            deviceDrops += d->GetQueue()->GetTotalDroppedPackets();
        }
        double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
        out["stats"] = {{"drops", drops},
                        {"device_drops", deviceDrops},
                        {"ecn_marks", marks},
                        {"link_packets", dequeued},
                        {"rtos", g_count.rtos},
                        {"fast_recoveries", g_count.fastRecoveries},
                        {"cnps", g_count.cnps},
                        {"nacks", g_count.nacks},
                        {"rate_timeouts", g_count.rateTimeouts},
                        {"retransmitted_bytes", g_count.retransmittedBytes},
                        {"unattributed_drops", g_unattributedDrops},
                        {"unattributed_marks", g_unattributedMarks},
                        {"wall_s", wall}};
        out["drops_marks_by_link"] = dropsByLink;
        if (g_traceBinS > 0)
        {
            // flows by job and sending rank (flow r: rank r -> rank r + 1; its receiver holds its arrivals)
            json flows = json::array();
            for (auto& j : g_jobs)
            {
                size_t n = j->ranks.size();
                for (size_t r = 0; r < n; ++r)
                {
                    const Rank& rx = *j->ranks[(r + 1) % n];
                    flows.push_back({{"job", j->id}, {"rank", r}, {"step_sent_s", j->ranks[r]->stepSentS},
                                     {"step_received_s", rx.stepReceivedS}, {"bytes_per_bin", rx.bytesPerBin}});
                }
            }
            std::map<Ptr<QueueDisc>, std::pair<uint32_t, uint32_t>> linkOf;
            for (auto& [key, q] : fabric.egress)
            {
                linkOf[q] = key;
            }
            json queues = json::array();
            for (auto& t : g_queueTraces)
            {
                if (t->arrivals.empty())
                {
                    continue;
                }
                auto key = linkOf.at(t->queue);
                size_t bins = 0;  // each series grew as far as its own last event: all to the longest
                for (auto* v : {&t->bytes, &t->arrivals, &t->queuedSum, &t->queuedMax, &t->marks})
                {
                    bins = std::max(bins, v->size());
                }
                for (auto* v : {&t->bytes, &t->arrivals, &t->queuedSum, &t->queuedMax, &t->marks})
                {
                    v->resize(bins, 0);
                }
                queues.push_back({{"from", names[key.first]}, {"to", names[key.second]},
                                  {"rate_bps", fabric.rateBps.at(key)}, {"bytes", t->bytes},
                                  {"arrivals", t->arrivals}, {"queued_sum", t->queuedSum},
                                  {"queued_max", t->queuedMax}, {"marks", t->marks}});
            }
            out["trace"] = {{"bin_s", g_traceBinS}, {"flows", flows}, {"queues", queues}};
        }
        Simulator::Destroy();
        std::string tmp = std::string(argv[2]) + ".part";
        {
            std::ofstream o(tmp);
            o << out.dump() << std::endl;
            if (!o)
            {
                Fail(std::string("cannot write ") + tmp);
            }
        }
        if (std::rename(tmp.c_str(), argv[2]) != 0)
        {
            Fail(std::string("cannot rename ") + tmp);
        }
    }
    catch (const json::exception& e)
    {
        Fail(std::string("scenario ") + argv[1] + ": " + e.what());
    }
    return 0;
}
