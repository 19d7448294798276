"""The corpus of bench/quality.py: runbooks and manuals in English and Chinese whose answers sit in later sections
(eight of them past the head of a long section), and the questions about them, each with its gold document and the
answer string that must reach `rendered`."""

# ruff: noqa: E501 — a document's paragraph is one line: a break inside it would change the text ingested and measured

from dataclasses import dataclass

PAYMENTS_RUNBOOK = """# Payments service runbook

## Overview
The payments service accepts card and bank transfers from the checkout, talks to three acquirers and writes every
movement to the ledger. This runbook is for the on-call engineer of the payments team and assumes access to the
production cluster, the deploy tool and the incident channel.

## Architecture
Requests enter through the payments API, which validates them and puts a job on the payments queue. A pool of
payment workers takes the jobs, calls the acquirer and records the result. The ledger database is a primary with
two replicas; reports read from the replicas only.

## Dashboards and alerts
The main dashboard shows accepted payments per minute, acquirer latency and the queue depth. An alert fires when
the success rate drops under the weekly baseline for ten minutes, or when the queue depth keeps growing. Alerts go
to the pager of the primary on-call engineer.

## Deploying a release
Releases are built from the main branch by the pipeline. A release goes to the canary hosts first, and the deploy
tool waits for the canary checks before it continues with the rest of the fleet. Never deploy on Friday afternoon.

## Restarting the workers
When workers are stuck or leak memory, restart them host by host with systemctl restart payments-worker@* and watch
the queue depth drain on the dashboard. A restart drops no jobs: a job that was running returns to the queue after
its visibility timeout and is picked up by another worker.

## Rolling back
If a release raises the error rate, roll it back with deployctl rollback payments --to previous, which redeploys the
last release that passed its canary. A rollback takes about four minutes for the whole fleet. Write the reason in
the incident channel so that the release owner can follow up.

## Database failover
If the ledger primary fails, the cluster manager promotes a replica on its own; the failover takes about 90 seconds,
during which the API answers with retryable errors. Check afterwards that the old primary rejoined as a replica
and that replication lag is back under one second.

## Escalation
When the incident lasts more than thirty minutes or money may have moved twice, escalate in the #payments-oncall
channel and page the payments engineering manager. Finance must be told within one hour of any double charge.
"""

SEARCH_MANUAL = """# Search cluster manual

## Introduction
The search cluster indexes the product catalogue, the help centre and the order history. It runs on nine data nodes
and three dedicated master nodes in two availability zones. This manual covers operations; the query language is
documented elsewhere.

## Hardware
Data nodes have 64 GB of memory, half of it for the heap, and local NVMe disks. Master nodes are small and hold no
data. Keep disk usage of every data node under seventy-five percent, or shard allocation stops moving shards to it.

## Installation
Nodes are installed from the configuration management repository. A new data node joins the cluster by itself once
its configuration names the master nodes; shards start to move to it within a few minutes and the cluster stays
green while they move.

## Index lifecycle
Every index has a lifecycle policy. Indices older than 30 days move to the warm tier, where they are merged into
fewer segments and kept read-only. After a year they are deleted, unless the legal team has placed them on hold.

## Snapshots
Snapshots go to the bucket s3://acme-search-snapshots every 6 hours and are kept for two weeks. A restore of one
index takes minutes; a restore of the whole cluster takes hours, so restore only the indices you need.

## Reindexing
A reindex copies an index into a new one with a changed mapping. Set refresh_interval to -1 on the target during a
reindex and set it back to one second when the copy is done; the copy is then about three times faster.

## Troubleshooting a red cluster
A red cluster has at least one primary shard that is not assigned. Ask the cluster why with
GET _cluster/allocation/explain, which names the shard and the reason, for example a full disk or a missing node.
Fix the cause before you retry allocation.
"""

VPN_GUIDE = """<html><head><title>VPN gateway administration guide</title></head><body>
<h1>VPN gateway administration guide</h1>
<h2>About the gateway</h2>
<p>The VPN gateway gives employees and contractors access to the internal network from outside the office. It runs
as a pair of virtual machines behind the load balancer, and each machine can carry every connection alone if the
other one fails.</p>
<h2>Requirements</h2>
<p>Clients need the company VPN profile and a device that passes the posture check: a supported operating system,
disk encryption and a running endpoint agent. Devices that fail the check are refused at connection time.</p>
<h2>Installing a gateway</h2>
<p>Gateways are built from the golden image and configured by the configuration management repository. A new
gateway is added to the load balancer pool only after it answers the health check for five minutes in a row.</p>
<h2>Certificates</h2>
<p>Every client authenticates with a certificate issued by the internal authority. Client certificates expire after
365 days and are renewed by the endpoint agent two weeks before they expire; a revoked certificate is refused
within one minute.</p>
<h2>Split tunnelling</h2>
<p>Only internal traffic goes through the tunnel. The gateway pushes routes for 10.20.0.0/16 only, so video calls
and web browsing leave the device directly. Contractors get a smaller route set that covers their project
networks.</p>
<h2>Logs</h2>
<p>Each gateway writes connection events to /var/log/vpn/gateway.log and ships them to the log platform. A line
names the user, the device, the assigned address and the reason of a refusal, which is where to start when a user
cannot connect.</p>
</body></html>
"""

ORDER_RUNBOOK = """# 订单服务运维手册

## 概述
订单服务负责下单、改单和取消订单，上游是购物车和结算页面，下游是库存、支付和物流系统。本手册面向订单团队的值班工程师，默认你已经有生产集群、发布工具和告警群的权限。遇到不确定的操作，先在告警群里说明情况，再动手处理，避免两个人同时操作同一个集群。

## 架构
请求经过网关进入订单接口，接口校验参数后写入订单库，再通过消息队列通知库存和支付。订单库是一主两从的结构，查询类接口只读从库。消息队列的消费者按业务拆成三组，任何一组积压都不会影响下单本身，但会让库存和支付的状态更新变慢。

## 监控
核心看板展示每分钟下单量、接口延迟和队列积压。下单成功率低于上周同期十分钟以上会触发告警，告警发送到值班工程师的手机。看板上的每个图表都可以点开查看对应的日志和调用链，排查时先看延迟最高的下游系统。

## 发布流程
订单服务固定在每周三晚上八点发布，节假日前一天不发布。发布先到灰度机器，观察十五分钟没有异常后再全量。紧急修复需要团队负责人批准，并在发布单里写明回滚方案和影响范围，发布后在告警群里同步结果。

## 扩容
大促前或者接口延迟持续升高时需要扩容。执行 kubectl scale deploy/order-api --replicas=12 把接口扩到十二个副本，扩容后观察延迟是否回落。数据库连接数有上限，副本数不要超过十六个，否则新副本会因为拿不到连接而反复重启。

## 数据库备份
订单库每天凌晨两点做全量备份，每小时做一次增量备份，备份保留 14 天。恢复演练每季度做一次，恢复单张表大约需要二十分钟，恢复整个库需要三个小时左右，所以误删数据时优先按表恢复。

## 故障升级
故障持续超过三十分钟，或者出现重复扣款、订单丢失，必须升级。在值班群 #order-oncall 里发布故障通报，同时电话通知订单团队负责人。涉及资金的问题要在一小时内通知财务团队，并保留相关订单号和时间点。
"""

LOG_MANUAL = """# 日志平台使用手册

## 简介
日志平台收集所有生产服务的应用日志、访问日志和审计日志，提供检索、统计和告警功能。平台按团队划分空间，每个团队只能看到自己空间里的日志。新服务上线前需要先接入日志平台，否则出现故障时无法排查。

## 接入方式
服务把日志以 JSON 格式写到标准输出，由节点上的采集器统一收集，不需要在代码里引入任何依赖。每条日志至少包含时间、级别、服务名和请求编号四个字段，缺少字段的日志会进入未分类空间，检索时很难找到。

## 查询语法
检索框支持按字段过滤、全文搜索和时间范围选择。多个条件之间默认是并且关系，可以用括号组合更复杂的条件。统计页面可以按任意字段分组计数，并把结果保存为看板，方便每天复查同一类问题。

## 告警规则
告警规则基于检索条件定义。最常用的规则是错误率告警：当连续 5 分钟错误率超过 2% 时触发，通知发送到团队的告警群。每条规则都要写清楚处理人和处理步骤，没有处理人的规则会在一周后被自动停用。

## 数据保留
热数据可以随时检索，日志保留 30 天，冷数据归档 180 天。归档的数据需要提交恢复申请，恢复后可检索七天。审计日志不受这个限制，按照合规要求单独保存三年，任何人都不能提前删除。

## 权限申请
查看其他团队的日志需要申请权限。在工单系统提交 LOG-ACCESS 工单，写明要访问的空间、原因和期限，由对方团队负责人审批。权限到期后自动收回，需要继续访问时重新提交工单，审批记录会保存一年。
"""

CACHE_MANUAL = """# 缓存集群手册

## 简介
缓存集群为商品详情、用户会话和推荐结果提供毫秒级读取。集群由六组主从节点组成，分布在两个机房。缓存里的数据都可以从数据库重建，所以缓存故障会让系统变慢，但不会丢数据，排查时不必担心数据完整性。

## 部署
缓存节点通过配置管理仓库部署，每组主从节点部署在不同的机房。新节点加入集群后，需要手动迁移槽位，迁移期间读写不受影响，但延迟会略有升高，所以迁移要安排在业务低峰期，并提前在告警群里通知。

## 容量规划
单个节点的内存使用率应保持在百分之七十以下，留出空间应对突发写入和后台持久化。每个月根据增长趋势评估一次容量，需要扩容时提前两周申请机器，大促前额外预留百分之三十的余量。

## 主从切换
主节点故障时哨兵会自动切换。需要手动切换时，在从节点上执行 redis-cli -p 6380 failover，切换过程通常在几秒内完成。切换后检查客户端是否已经连接到新的主节点，并确认旧主节点恢复后以从节点身份重新加入。

## 内存淘汰策略
会话和推荐结果所在的集群使用 allkeys-lru 淘汰策略，内存满时淘汰最近最少使用的键。商品详情集群使用带过期时间的策略，只淘汰设置了过期时间的键，因此写入商品详情时必须设置过期时间。

## 慢查询
慢查询会阻塞整个节点。我们把 slowlog-log-slower-than 设置为 10000 微秒，超过这个时间的命令会被记录下来。每周检查一次慢查询日志，常见原因是一次读取过多的键，或者对很大的集合做全量遍历。
"""

# Long sections: the answers sit past the first ~450 characters of their section, where an abstract (the head of
# the text, without an LLM) no longer reaches.
STORAGE_MANUAL = """# Object storage operations manual

## Service overview
The object storage service keeps build artefacts, backups, media uploads and data exports for every product team.
It runs as a cluster of storage nodes behind a pair of gateways that speak the S3 protocol. Buckets belong to teams;
each team has an owner who approves access requests and who is told when the bucket grows faster than planned.
Objects are written once and never changed in place: an update is a new version, and old versions are removed by
the lifecycle rules of the bucket. Clients authenticate with access keys issued by the platform team, and every
request is logged with the key, the bucket, the object and the size, so usage can be billed back to the team.

## Capacity and erasure coding
Every object is split into data and parity fragments that are spread over different nodes and racks, so the loss
of a node or a whole rack loses no data. The cluster reports its raw and usable capacity on the storage dashboard,
and the platform team orders new nodes when usable capacity is forecast to run out within one quarter. Small
objects cost more than their size suggests, because each one carries metadata and a minimum fragment size; teams
that store millions of tiny files are asked to pack them into archives first. The erasure coding profile of new
buckets is 8 data fragments plus 3 parity fragments, which survives the loss of any three nodes at an overhead of
about 37 percent. Older buckets still use replication and are migrated one by one during quiet weekends.

## Replacing a failed disk
A failed disk is reported by the node agent within a minute and appears on the dashboard with its node and slot.
The cluster starts rebuilding the missing fragments on other disks at once, so a replacement is not urgent, but
it should happen within a working day. Pull the disk only when its locate light is on, to avoid pulling a healthy
one by mistake. Replacement disks of the same size are kept in the spare cabinet of each data centre, and a
disk that is larger than the others of its node is accepted but only partly used. After the new disk is in, register it with storagectl disk add --node NODE --slot SLOT and the node
agent formats it and returns it to the pool; the rebuild onto the new disk then runs in the background at a
limited rate so that client traffic is not slowed down.
"""

BACKUP_MANUAL = """# 备份系统手册

## 备份策略
备份系统负责所有数据库、文件存储和配置仓库的定期备份。每个系统的负责人需要在备份平台上登记备份对象、备份周期和保留时间，平台按照登记的信息自动执行备份任务。备份数据写入独立的存储集群，与生产环境物理隔离，即使生产机房整体故障，备份数据也不会受到影响。所有备份任务的执行结果都会发送到负责人的邮箱，连续两次失败会自动升级到值班工程师。为了控制成本，不同级别的数据使用不同的保留策略，核心交易数据的保留时间最长，日志类数据的保留时间最短，具体时间以平台登记为准。平台每个月生成一份备份报告，列出每个系统的备份大小、成功率和恢复演练情况，报告会抄送给各团队负责人。备份平台本身也有备份，它的配置和元数据每天同步到另一个机房，平台故障时可以在一小时内切换到备用实例继续执行任务。新系统接入时，负责人需要先在测试环境完成一次完整的备份和恢复，确认备份内容可用之后，才能把备份任务切换到生产环境。备份存储集群的容量由备份团队统一规划，各团队不需要单独申请存储空间，但是备份数据量增长过快时，备份团队会联系负责人确认原因，必要时调整备份周期或者保留时间。
核心数据库的备份在每天凌晨三点开始，全量备份完成后会自动校验备份文件的完整性，校验失败的备份会立即重试一次。

## 恢复流程
需要恢复数据时，先在备份平台上提交恢复申请，写明要恢复的系统、时间点和目标环境。恢复到生产环境需要系统负责人和值班经理两个人审批，恢复到测试环境只需要系统负责人审批。审批通过后，平台会自动分配恢复任务，并在恢复完成后通知申请人。恢复过程中不要对目标环境做任何写入操作，否则可能导致数据不一致，恢复结束后还需要申请人确认数据是否正确。对于大型数据库，恢复时间和数据量成正比，一般每小时可以恢复大约五百吉字节的数据，申请时要预留足够的时间窗口。恢复到测试环境的数据在三十天后自动清理，如果需要长期保留，要在申请里说明原因并得到数据负责人的同意。涉及个人信息的数据恢复到测试环境之前，平台会先做脱敏处理，脱敏规则由安全团队维护，任何人都不能跳过这一步。每次恢复操作都会记录在审计日志里，包括申请人、审批人、恢复的时间点和目标环境，审计日志保存三年，安全团队每个季度抽查一次。恢复演练和真实恢复使用同一套流程，演练的结果会写进月度备份报告，演练失败的系统需要在两周内完成整改并重新演练。
如果恢复失败，平台会保留失败现场，由备份团队在四小时内给出分析结论。
"""

CI_HANDBOOK = """# Build and release pipeline handbook

## What the pipeline does
Every merge to the main branch of a service repository starts the pipeline. It compiles the service, runs the
tests, builds a container image, scans it and publishes it to the internal registry, where the deploy tool picks it
up. Branches other than main run the same steps except the publishing one, so that a pull request shows the same
result as the merge it would become.

## Build runners and caches
Builds run on a pool of ephemeral runners that are created for one job and destroyed after it, so that no job can
see the files of another. A runner has four cores and sixteen gigabytes of memory; a job that needs more asks for
the large runner class in its pipeline file, and the platform team reviews those requests once a month because the
large class costs four times as much. Dependencies are downloaded through the package mirror, never from the public
registries directly, which keeps builds working when a public registry is down and lets the security team block a
bad package everywhere at once. Each repository has its own build cache keyed by the lock file of its dependencies.
A cache entry that has not been used for 14 days is evicted by the nightly cleanup job, and a repository whose cache
grows over twenty gigabytes is told so in its pipeline summary.

## Flaky tests and quarantine
A test that fails and then passes on a retry of the same commit is marked flaky by the test reporter, which keeps a
history of every test over the last month. Flaky tests slow every team down, because a red build blocks the merge
queue until someone retries it, and because people stop trusting red builds at all. The owning team gets a ticket
for each flaky test, with the failure logs and the commits where it failed. Teams are expected to fix the test or
delete it; a test that is still flaky after the ticket has been open for a week is taken out of the blocking set.
To take a test out of the blocking set, add it to the quarantine list with ci quarantine add TEST_ID --reason TEXT;
the test still runs and reports, but its failures no longer block the merge queue until it is removed from the list.
"""

QUEUE_MANUAL = """# 消息队列运维手册

## 简介
消息队列集群承载订单、支付、库存和通知四类业务的异步消息，由五个代理节点组成，分布在两个机房。每个业务有自己的主题，主题的分区数在创建时确定，之后只能增加不能减少。

## 消费积压处理
消费积压是最常见的告警。积压告警的阈值按主题单独配置，默认是任何一个分区的积压超过十万条并且持续十分钟。收到告警后，先在看板上确认积压是集中在个别分区，还是所有分区都在增长：个别分区积压通常是某个消费者实例卡住了，重启那个实例就能恢复；所有分区都在增长，说明消费能力整体不够，或者下游系统变慢了。消费能力不够时，可以增加消费者实例，但实例数超过分区数以后，多出来的实例不会分到任何分区，增加也没有用。下游系统变慢时，增加消费者反而会加重下游的压力，这时应该先联系下游团队。处理积压期间不要重置消费位点，否则可能丢失消息或者重复消费，除非业务负责人明确同意。积压消除以后，在告警群里说明原因和处理过程，并在一周内提交复盘记录。复盘记录要写清楚积压开始和结束的时间、影响的业务、采取的措施和后续的改进计划，改进计划要有负责人和完成时间。平台团队每个月汇总一次所有的积压事件，找出反复出现的问题，和相关团队一起制定长期的解决方案，比如调整分区数、优化消费逻辑或者拆分主题。
如果积压超过两个小时仍然没有下降，要电话通知消息平台负责人，并在值班群 #mq-oncall 里发布故障通报。

## 主题和权限
创建主题需要在工单系统提交申请，写明业务名称、预计的消息量、消息大小和保留时间，由消息平台团队评估分区数。生产者和消费者都需要单独的访问凭证，凭证按应用发放，不同应用不能共用同一个凭证，凭证泄露时平台团队可以单独吊销，不会影响其他应用。消息默认保留七天，超过七天的消息会被自动删除，需要更长保留时间的主题要说明原因，并由数据负责人审批。单条消息的大小不能超过一兆字节，更大的数据应该先写入对象存储，消息里只放对象的地址。每个季度平台团队会清理一次没有生产者也没有消费者的主题，清理前会通知主题的负责人。分区数决定了一个主题最多能有多少个消费者同时工作，分区太少会限制消费能力，分区太多又会增加代理节点的负担，所以申请时要根据预计的峰值消息量估算，后续再根据监控数据调整。增加分区会让同一个键的消息在短时间内分到新的分区，依赖消息顺序的业务要先暂停生产者，等旧分区里的消息全部消费完以后再恢复，否则可能出现乱序。扩容分区的操作由平台团队在业务低峰期执行，申请时要写明可以接受的操作时间窗口。
主题的分区数最多可以扩到六十四个，超过这个数量需要拆分成多个主题。
"""

DOCUMENTS = {
    "payments-runbook.md": PAYMENTS_RUNBOOK,
    "search-cluster-manual.md": SEARCH_MANUAL,
    "vpn-admin-guide.html": VPN_GUIDE,
    "订单服务运维手册.md": ORDER_RUNBOOK,
    "日志平台使用手册.md": LOG_MANUAL,
    "缓存集群手册.md": CACHE_MANUAL,
    "object-storage-manual.md": STORAGE_MANUAL,
    "备份系统手册.md": BACKUP_MANUAL,
    "ci-pipeline-handbook.md": CI_HANDBOOK,
    "消息队列运维手册.md": QUEUE_MANUAL,
}


@dataclass(frozen=True)
class Question:
    query: str
    document: str  # a key of DOCUMENTS: the gold is that document or one of its sections
    answer: str  # must appear verbatim in `rendered`
    language: str
    deep: bool = False  # the answer sits past the head (~450 characters) of its section


QUESTIONS = [
    Question(
        "How do I restart the payment workers?", "payments-runbook.md", "systemctl restart payments-worker@*", "en"
    ),
    Question(
        "What is the command to roll back a bad payments release?",
        "payments-runbook.md",
        "deployctl rollback payments --to previous",
        "en",
    ),
    Question("How long does a ledger database failover take?", "payments-runbook.md", "about 90 seconds", "en"),
    Question("Where do I escalate a long payments incident?", "payments-runbook.md", "#payments-oncall", "en"),
    Question("When do search indices move to the warm tier?", "search-cluster-manual.md", "older than 30 days", "en"),
    Question(
        "Which bucket holds the search snapshots?", "search-cluster-manual.md", "s3://acme-search-snapshots", "en"
    ),
    Question(
        "What refresh interval should I use while reindexing?",
        "search-cluster-manual.md",
        "refresh_interval to -1",
        "en",
    ),
    Question(
        "How do I find out why the search cluster is red?",
        "search-cluster-manual.md",
        "GET _cluster/allocation/explain",
        "en",
    ),
    Question("How long are VPN client certificates valid?", "vpn-admin-guide.html", "365 days", "en"),
    Question("Which routes does the VPN gateway push to clients?", "vpn-admin-guide.html", "10.20.0.0/16", "en"),
    Question("Where are the VPN gateway connection logs?", "vpn-admin-guide.html", "/var/log/vpn/gateway.log", "en"),
    Question("订单服务什么时候发布？", "订单服务运维手册.md", "每周三晚上八点", "zh"),
    Question(
        "订单接口怎么扩容到十二个副本？", "订单服务运维手册.md", "kubectl scale deploy/order-api --replicas=12", "zh"
    ),
    Question("订单库的备份保留多少天？", "订单服务运维手册.md", "备份保留 14 天", "zh"),
    Question("订单故障要在哪个群里升级？", "订单服务运维手册.md", "#order-oncall", "zh"),
    Question("错误率告警的触发条件是什么？", "日志平台使用手册.md", "连续 5 分钟错误率超过 2%", "zh"),
    Question("日志保留多久，冷数据归档多久？", "日志平台使用手册.md", "日志保留 30 天，冷数据归档 180 天", "zh"),
    Question("怎么申请查看其他团队的日志权限？", "日志平台使用手册.md", "LOG-ACCESS", "zh"),
    Question("缓存主从怎么手动切换？", "缓存集群手册.md", "redis-cli -p 6380 failover", "zh"),
    Question("会话缓存用的是什么内存淘汰策略？", "缓存集群手册.md", "allkeys-lru", "zh"),
    Question("慢查询的阈值设置是多少？", "缓存集群手册.md", "10000 微秒", "zh"),
    Question(
        "What erasure coding profile do new storage buckets use?",
        "object-storage-manual.md",
        "8 data fragments plus 3 parity fragments",
        "en",
        deep=True,
    ),
    Question(
        "How do I register a replacement disk in a storage node?",
        "object-storage-manual.md",
        "storagectl disk add --node NODE --slot SLOT",
        "en",
        deep=True,
    ),
    Question("核心数据库的备份几点开始？", "备份系统手册.md", "每天凌晨三点", "zh", deep=True),
    Question("恢复失败后多久给出分析结论？", "备份系统手册.md", "四小时内", "zh", deep=True),
    Question(
        "When are unused build cache entries evicted?",
        "ci-pipeline-handbook.md",
        "not been used for 14 days",
        "en",
        deep=True,
    ),
    Question(
        "How do I quarantine a flaky test?",
        "ci-pipeline-handbook.md",
        "ci quarantine add TEST_ID --reason TEXT",
        "en",
        deep=True,
    ),
    Question("消息积压两个小时没有下降要在哪个群里通报？", "消息队列运维手册.md", "#mq-oncall", "zh", deep=True),
    Question("主题的分区数最多能扩到多少个？", "消息队列运维手册.md", "六十四个", "zh", deep=True),
]
