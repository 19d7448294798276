"""The corpus of `bench.quality --suite recall` (issue 21): one developer's store as an agent would fill it —
profile, preferences, entities, dated events and experiences, resources and skills, 120 items of which 51 (42.5 %)
are Chinese — and the questions asked of it, each with the item that answers it and the answer string that must
reach `rendered`, or none when nothing in the store answers it.

Every answer string occurs in its item and in no other (`validate()`), so "answer in rendered" means that item was
served with enough of its text. Resources and skills are served at `abstract` (RFC §3.4), so their answers sit in
the head of a section or in a skill's description; memories are short enough that their abstract is their text.
"""

from dataclasses import dataclass

BENCH_FOLDER = "recall-bench"  # below each memory category: the run removes only what it wrote
RESOURCES_ROOT = f"viking://resources/{BENCH_FOLDER}"
SKILLS_ROOT = "viking://agent/default/skills"
KINDS = ("profile", "preferences", "entities", "events", "experiences", "resources", "skills")


@dataclass(frozen=True)
class Item:
    kind: str  # one of KINDS
    name: str  # a memory's file name, a resource's path below RESOURCES_ROOT, a skill's name
    language: str
    text: str

    def uri(self, user: str) -> str:
        """Where the item is written; a skill's folder, whose SKILL.md its document is."""
        if self.kind == "profile":
            return f"viking://user/{user}/memories/profile.md"
        if self.kind == "resources":
            return f"{RESOURCES_ROOT}/{self.name}"
        if self.kind == "skills":
            return f"{SKILLS_ROOT}/{self.name}"
        return f"viking://user/{user}/memories/{self.kind}/{BENCH_FOLDER}/{self.name}"


@dataclass(frozen=True)
class Question:
    query: str
    answer: str | None  # must appear verbatim in `rendered`; None: nothing in the store answers the question
    item: str | None  # the name of the item holding the answer
    language: str


def _skill(name: str, description: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n\n{body}"


ITEMS = [
    Item(
        "profile",
        "profile.md",
        "en",
        "# Profile\nPriya Raman, senior backend engineer on the platform team at Northwind Labs, based in the Berlin "
        "office (time zone Europe/Berlin). Works mostly in Go and Python, on ledger-gateway and the internal "
        "developer platform. Reports to Ravi Iyer, director of engineering. Speaks English and Tamil, is learning "
        "Mandarin for the work with the Shanghai team. On call for ledger-gateway one week in five.",
    ),
    # preferences, English
    Item(
        "preferences",
        "pull-request-size.md",
        "en",
        "Prefers small pull requests, under 400 changed lines; bigger changes are split into stacked PRs.",
    ),
    Item(
        "preferences",
        "python-style.md",
        "en",
        "Python style: ruff for linting and formatting with line length 120, type hints on every function.",
    ),
    Item(
        "preferences",
        "editor.md",
        "en",
        "Editor: Neovim with the gruvbox theme inside a tmux split. Do not suggest VS Code extensions.",
    ),
    Item(
        "preferences",
        "meeting-hours.md",
        "en",
        "No meetings before 10:00 Berlin time: mornings are for focused coding.",
    ),
    Item("preferences", "coffee.md", "en", "Drinks a flat white with oat milk; decaf after 3 pm."),
    Item(
        "preferences",
        "commit-messages.md",
        "en",
        "Commit messages follow Conventional Commits (feat:, fix:, chore:) with the Jira key in the footer.",
    ),
    Item(
        "preferences",
        "diagrams.md",
        "en",
        "Architecture diagrams are drawn in Mermaid inside the Markdown docs, never in separate drawing tools.",
    ),
    Item(
        "preferences",
        "testing.md",
        "en",
        "Tests: pytest, with hypothesis for property-based tests; no unittest classes in new code.",
    ),
    Item(
        "preferences",
        "status-updates.md",
        "en",
        "Prefers written async updates in the #platform-standup channel over daily stand-up calls.",
    ),
    Item(
        "preferences",
        "business-travel.md",
        "en",
        "Business travel: aisle seat, train instead of flights for trips under five hours, hotels within walking "
        "distance of the office.",
    ),
    # preferences, Chinese
    Item("preferences", "tea.md", "zh", "喜欢喝铁观音，下午不喝咖啡。"),
    Item("preferences", "writing-language.md", "zh", "代码注释用英文写，设计文档和周报用中文写。"),
    Item("preferences", "weekly-report-format.md", "zh", "周报固定三段式：本周进展、风险、下周计划，每段不超过五条。"),
    Item("preferences", "food.md", "zh", "午饭不吃辣，对花生过敏，团队聚餐时请避开花生。"),
    Item("preferences", "meeting-tool.md", "zh", "和上海同事开会更喜欢用飞书视频会议，不用 Zoom。"),
    Item("preferences", "terminal.md", "zh", "终端用 zsh 配 starship 提示符，字体用等距更纱黑体。"),
    Item("preferences", "learning-chinese.md", "zh", "学中文：每天用 Anki 背 20 个生词，周末和语伴练口语。"),
    Item("preferences", "shanghai-hotel.md", "zh", "在上海出差喜欢住在静安寺附近，离地铁二号线近。"),
    # entities, English
    Item(
        "entities",
        "billing-team.md",
        "en",
        "Billing team: owns invoice-service, the dunning worker and the tax library taxcalc. Team lead is Tomasz "
        "Nowak; the team channel is #billing-eng. They deploy on Tuesdays and Thursdays.",
    ),
    Item(
        "entities",
        "tomasz-nowak.md",
        "en",
        "Tomasz Nowak, billing team lead, works from Warsaw. Prefers asynchronous code reviews and answers within "
        "a day; ask him before changing the tax rules. Birthday on 3 May.",
    ),
    Item(
        "entities",
        "ledger-gateway.md",
        "en",
        "ledger-gateway: the Payments Core team's Go service in front of the ledger database. Serves gRPC on port "
        "8443 and metrics on 9090. Priya is one of its three maintainers; the others are Jonas Weber and Mei.",
    ),
    Item(
        "entities",
        "hannah-becker.md",
        "en",
        "Hannah Becker, SRE on the platform team, owns the PagerDuty schedules and the alert routing rules. "
        "On-call swaps have to be arranged with her at least 48 hours ahead.",
    ),
    Item(
        "entities",
        "data-platform-team.md",
        "en",
        "Data Platform team: runs the Airflow 2.9 cluster dp-airflow-prod and the dbt project warehouse-models. "
        "Lead: Marcus. Requests go through the DATA board in Jira.",
    ),
    Item(
        "entities",
        "marcus-lindqvist.md",
        "en",
        "Marcus Lindqvist, Data Platform lead, based in Stockholm. Priya worked with him before at Kelvin Systems. "
        "Prefers a video call to a long Slack thread.",
    ),
    Item(
        "entities",
        "flagpole.md",
        "en",
        "flagpole: the feature-flag service, owned by the Growth team. Flags older than 90 days are reported as "
        "stale every Monday; the Go SDK is at v3.4.",
    ),
    Item(
        "entities",
        "ana-souza.md",
        "en",
        "Ana Souza, product manager for checkout. Weekly sync with her on Tuesdays at 10:30. She wants estimates "
        "in t-shirt sizes, not in days.",
    ),
    Item(
        "entities",
        "notify-hub.md",
        "en",
        "notify-hub: sends e-mail and push notifications for every product. E-mail goes through Postmark, push "
        "through Firebase. Hard limit of 300 e-mails per second per tenant.",
    ),
    Item(
        "entities",
        "kwame-mensah.md",
        "en",
        "Kwame Mensah, security engineer: approves production access requests and runs the SOC 2 audit. Tickets "
        "for him start with SEC-.",
    ),
    Item(
        "entities",
        "mobile-team.md",
        "en",
        "Mobile team: builds the React Native app Northwind Go. Release train every second Thursday; the release "
        "captain rotates and is currently Femi Adeyemi.",
    ),
    Item(
        "entities",
        "auth-service.md",
        "en",
        "auth-service: the Identity team's OAuth server. Access tokens expire after 15 minutes, refresh tokens "
        "after 30 days; the signing keys rotate every quarter.",
    ),
    Item(
        "entities",
        "project-kestrel.md",
        "en",
        "Project Kestrel: moving the billing database from MySQL 5.7 to PostgreSQL 16. Deadline 31 March 2027; "
        "Priya writes the dual-write layer.",
    ),
    Item(
        "entities",
        "ravi.md",
        "en",
        "Ravi, director of engineering and Priya's manager. 1:1 every other Friday at 14:00; he likes a written "
        "agenda in the shared doc the day before.",
    ),
    Item(
        "entities",
        "sofia-marino.md",
        "en",
        "Sofia Marino leads the Identity team in Milan. Contact her for SSO integrations and SCIM provisioning.",
    ),
    Item(
        "entities",
        "julia-fischer.md",
        "en",
        "Julia Fischer, account manager at our hosting provider Brightcloud. The reserved-instance renewal is due "
        "every October.",
    ),
    Item(
        "entities",
        "mei-tanaka.md",
        "en",
        "Mei Tanaka, backend engineer in Payments Core since August 2026. Priya is her onboarding buddy until the "
        "end of the year.",
    ),
    # entities, Chinese
    Item(
        "entities",
        "risk-team.md",
        "zh",
        "风控组：负责反欺诈服务 risk-engine 和设备指纹服务，组长是陈思远，团队在上海办公室 12 楼。",
    ),
    Item(
        "entities",
        "chen-siyuan.md",
        "zh",
        "陈思远：风控组组长，习惯在周四下午开评审会，沟通用中文就好，英文邮件他回得比较慢。",
    ),
    Item(
        "entities",
        "order-center.md",
        "zh",
        "订单中心（order-center）：交易组维护的 Java 17 服务，订单库拆成 16 个分库，负责人是刘洋。",
    ),
    Item(
        "entities",
        "wang-xiaowen.md",
        "zh",
        "王晓雯：测试负责人，维护回归测试平台「青鸟」，提测要在前一天下午五点前提交。",
    ),
    Item(
        "entities",
        "xinghe-warehouse.md",
        "zh",
        "星河数仓：公司的数据仓库，由数据组维护，每天凌晨四点从业务库同步一次，用 Trino 查询。",
    ),
    Item(
        "entities",
        "ops-team.md",
        "zh",
        "运维组：负责上海的 Kubernetes 生产集群 sh-prod-02，组长是李强，值班群叫「运维值班」。",
    ),
    Item("entities", "li-qiang.md", "zh", "李强：运维组组长，以前在杭州做过五年 DBA，数据库方面的问题可以直接问他。"),
    Item(
        "entities",
        "xiaomifeng.md",
        "zh",
        "客服系统「小蜜蜂」：客服技术组的工单系统，接口 QPS 上限 2000，超过会返回 429。",
    ),
    Item(
        "entities",
        "zhao-yating.md",
        "zh",
        "赵雅婷：会员体系的产品经理，周报要在每周五中午十二点前交，喜欢用飞书文档写需求。",
    ),
    Item(
        "entities", "yunxuntong.md", "zh", "云讯通：我们的短信服务商，合同到期日是 2027 年 6 月 30 日，对接人是孙经理。"
    ),
    Item(
        "entities",
        "phoenix-project.md",
        "zh",
        "凤凰计划：把交易单体拆成微服务的项目，第一阶段截止 2027 年 1 月 15 日，由技术总监周明牵头。",
    ),
    Item(
        "entities", "zhang-lei.md", "zh", "张磊：前端负责人，正在推动所有前端项目从 Webpack 迁移到 Vite，预计年底完成。"
    ),
    Item(
        "entities",
        "pay-gateway.md",
        "zh",
        "支付网关（pay-gateway）：支付组维护，调用银行接口的超时时间是 800 毫秒，超时后自动重试一次。",
    ),
    # events, English
    Item(
        "events",
        "2026-07-15-failover-drill.md",
        "en",
        "2026-07-15: ledger database failover drill. The switchover took 4 min 12 s, over the 2-minute target, "
        "because the DNS TTLs were 300 s.",
    ),
    Item(
        "events",
        "2026-08-21-notify-hub-outage.md",
        "en",
        "2026-08-21: notify-hub outage. The Postmark API key expired and e-mails were dropped for 47 minutes. "
        "Action item: alert 30 days before a key expires.",
    ),
    Item(
        "events",
        "2026-09-14-duplicate-invoices.md",
        "en",
        "2026-09-14: incident INC-2291. invoice-service sent 312 duplicate invoices because the retry job had no "
        "idempotency key. Postmortem owner: Tomasz; the fix puts a key on every invoice write.",
    ),
    Item(
        "events",
        "2026-09-30-hackathon.md",
        "en",
        "2026-09-30: hackathon. Our project Pagerbot, a Slack bot that summarises alerts, won second place.",
    ),
    Item(
        "events",
        "2026-10-02-lisbon-offsite.md",
        "en",
        "2026-10-02: platform team offsite in Lisbon. Decided to adopt OpenTelemetry in every service by Q2 2027 "
        "and to retire the old StatsD pipeline.",
    ),
    Item(
        "events",
        "2026-10-20-performance-review.md",
        "en",
        "2026-10-20: performance review with Ravi. Promotion to staff engineer approved, effective 1 January 2027.",
    ),
    Item(
        "events",
        "2026-10-28-q1-planning.md",
        "en",
        "2026-10-28: Q1 2027 planning. Goal: ledger-gateway p99 latency below 120 ms; budget for two more "
        "replicas approved.",
    ),
    Item(
        "events",
        "2026-11-05-ci-migration.md",
        "en",
        "2026-11-05: moved the ledger-gateway CI from Jenkins to GitHub Actions; the build went from 14 to 6 minutes.",
    ),
    Item(
        "events",
        "2026-11-12-kafka-upgrade.md",
        "en",
        "2026-11-12: the Kafka upgrade to 3.7 is scheduled for 3 December 2026, maintenance window 02:00–04:00 UTC. "
        "Priya is the change owner.",
    ),
    Item(
        "events",
        "2026-11-18-sre-interview.md",
        "en",
        "2026-11-18: interviewed Lena Vogt for the SRE role (system design round). Recommended hire; strong on "
        "Kubernetes networking.",
    ),
    Item(
        "events",
        "2026-11-20-checkout-launch.md",
        "en",
        "2026-11-20: agreed with Ana to ship the new checkout flow behind the flag checkout_v2 on 8 January 2027.",
    ),
    Item(
        "events",
        "2026-11-25-soc2-evidence.md",
        "en",
        "2026-11-25: the SOC 2 evidence for the platform controls is due to Kwame by 15 December 2026.",
    ),
    Item(
        "events",
        "2026-12-01-dentist.md",
        "en",
        "2026-12-01: booked a dentist appointment for 9 December at 08:30, Praxis Dr. Hoffmann on Kastanienallee.",
    ),
    Item(
        "events",
        "2026-12-04-talk-accepted.md",
        "en",
        "2026-12-04: my talk on idempotent payment APIs was accepted at Berlin Backend Summit, 12 March 2027.",
    ),
    # events, Chinese
    Item(
        "events",
        "2026-08-30-sms-delay.md",
        "zh",
        "2026-08-30：云讯通短信延迟事故，验证码短信延迟 35 分钟，事后加了备用通道。",
    ),
    Item("events", "2026-09-22-hsk.md", "zh", "2026-09-22：通过了 HSK 四级考试，成绩 251 分。"),
    Item(
        "events",
        "2026-10-09-risk-dsl.md",
        "zh",
        "2026-10-09：和陈思远开会，决定风控规则引擎从 Drools 迁移到自研 DSL，预计 2027 年 2 月完成。",
    ),
    Item(
        "events",
        "2026-10-16-load-test.md",
        "zh",
        "2026-10-16：订单中心大促压测，峰值达到 4.2 万 QPS，数据库 CPU 最高 78%。",
    ),
    Item("events", "2026-10-25-team-outing.md", "zh", "2026-10-25：上海团队团建去了莫干山，住了两晚民宿。"),
    Item(
        "events",
        "2026-11-03-shanghai-trip.md",
        "zh",
        "2026-11-03：到上海出差三天，和运维组一起参观了嘉定机房，讨论了容灾方案。",
    ),
    Item(
        "events",
        "2026-11-11-double-eleven.md",
        "zh",
        "2026-11-11：双十一值班，支付网关出现大量超时，21:47 打开了降级开关，22:30 恢复正常。",
    ),
    Item(
        "events",
        "2026-11-27-phoenix-review.md",
        "zh",
        "2026-11-27：凤凰计划评审会，决定第一个拆出来的是库存服务，负责人是吴昊。",
    ),
    Item(
        "events",
        "2026-11-30-cluster-scale-up.md",
        "zh",
        "2026-11-30：李强申请把上海生产集群扩容到 60 个节点，已经批准。",
    ),
    Item("events", "2026-12-02-points-rules.md", "zh", "2026-12-02：和赵雅婷确认会员积分新规则在 12 月 18 日上线。"),
    # experiences, English
    Item(
        "experiences",
        "index-on-large-tables.md",
        "en",
        "Lesson: on large tables create indexes with CREATE INDEX CONCURRENTLY, in a migration of its own; a plain "
        "CREATE INDEX once locked the invoices table for 9 minutes.",
    ),
    Item(
        "experiences",
        "timezone-flaky-tests.md",
        "en",
        "Flaky CI tests in billing came from the runner's local time zone; running the suite with TZ=UTC fixed them.",
    ),
    Item(
        "experiences",
        "ledger-gateway-memory-leak.md",
        "en",
        "Memory leak in ledger-gateway: found with a pprof heap profile, an unbounded map used as a cache. "
        "Replaced by an LRU of 10,000 entries.",
    ),
    Item(
        "experiences",
        "kafka-rebalance-storms.md",
        "en",
        "Kafka consumer lag spikes came from rebalance storms: max.poll.interval.ms was too low for slow batches. "
        "Raising it to 600000 stopped them.",
    ),
    Item(
        "experiences",
        "terraform-lock.md",
        "en",
        "A Terraform state lock stuck after a cancelled pipeline: run terraform force-unlock LOCK_ID, but only "
        "after checking that nobody else is applying.",
    ),
    Item(
        "experiences",
        "connection-exhaustion.md",
        "en",
        "Postgres ran out of connections during the autumn sale; PgBouncer in transaction mode with a pool of 40 "
        "per service fixed it.",
    ),
    Item(
        "experiences",
        "postmortems.md",
        "en",
        "Postmortems work best blameless and published within 5 working days, while everyone still remembers.",
    ),
    Item(
        "experiences",
        "cert-manager-dns01.md",
        "en",
        "cert-manager renewals failed because the DNS01 challenge token lacked the Zone:DNS:Edit scope.",
    ),
    # experiences, Chinese
    Item(
        "experiences",
        "slow-sql.md",
        "zh",
        "排查慢 SQL 的经验：先看执行计划。那次是缺少 (user_id, created_at) 联合索引，加上以后查询从 3 秒降到 40 毫秒。",
    ),
    Item(
        "experiences", "canary-release.md", "zh", "灰度发布的经验：先放 5% 流量观察 30 分钟，错误率没有上升再放到 50%。"
    ),
    Item(
        "experiences",
        "redis-big-key.md",
        "zh",
        "Redis 大 key 导致超时：用 redis-cli --bigkeys 找到一个 2GB 的哈希，拆成 64 个分片以后恢复正常。",
    ),
    Item(
        "experiences",
        "cross-timezone-meetings.md",
        "zh",
        "跨时区协作的经验：和上海同事的会约在柏林时间早上 8 点，也就是北京时间下午 3 点（冬令时）。",
    ),
    Item(
        "experiences",
        "log-encoding.md",
        "zh",
        "线上日志出现中文乱码，原因是容器没有设置 LANG=C.UTF-8，在基础镜像里加上以后解决。",
    ),
    Item(
        "experiences",
        "java-full-gc.md",
        "zh",
        "Java 服务频繁 Full GC：把堆从 4G 调到 8G，并换成 G1 收集器以后，停顿从 2 秒降到 200 毫秒以内。",
    ),
    # resources, English
    Item(
        "resources",
        "handbook/oncall-policy.md",
        "en",
        "# On-call policy\n\n## Rotation\nThe platform rotation changes every Monday at 11:00 Berlin time, with a "
        "handover call between the outgoing and the incoming engineer. Open incidents and running changes are "
        "handed over in writing in the on-call channel.\n\n## Response times\nSEV1 pages must be acknowledged "
        "within 10 minutes and SEV2 pages within 30 minutes. After two missed pages the secondary is paged, then "
        "the engineering manager.\n\n## Compensation\nEvery on-call week earns one day off, to be taken within the "
        "following month. Pages at night are also paid at the overtime rate.\n",
    ),
    Item(
        "resources",
        "handbook/expense-policy.md",
        "en",
        "# Travel and expenses\n\nSubmit expenses in Spendly within 30 days of the trip. Hotels are reimbursed up "
        "to 180 EUR per night in Europe and 1,200 CNY per night in China. Business class only for flights longer "
        "than nine hours.\n",
    ),
    Item(
        "resources",
        "architecture/adr-017-event-bus.md",
        "en",
        "# ADR-017: Kafka as the event bus\n\nStatus: accepted (2025-06-11).\n\n## Decision\nEvery service "
        "publishes its domain events to Kafka. RabbitMQ stays only for the legacy mail queue until that queue is "
        "retired.\n\n## Consequences\nTopics are named domain.entity.event, for example billing.invoice.created, "
        "and every schema is registered in the schema registry before the first message is produced.\n",
    ),
    Item(
        "resources",
        "runbooks/notify-hub.md",
        "en",
        "# notify-hub runbook\n\n## Rotating the Postmark key\nCreate the new key in the Postmark console, run "
        "notifyctl keys rotate --provider postmark and check on the dashboard that the send rate recovers within a "
        "minute. Revoke the old key only after that.\n\n## Bounce storms\nIf bounces exceed 5 % of sends, pause the "
        "marketing traffic with notifyctl queue pause campaigns and tell the Growth team.\n",
    ),
    Item(
        "resources",
        "handbook/production-access.md",
        "en",
        "# Production access\n\nProduction hosts are reached through Teleport only, and a session lasts 8 hours. "
        "Request access in #sec-access with the ticket number. Break-glass accounts are sealed in the vault and "
        "every use is reviewed the next day.\n",
    ),
    Item(
        "resources",
        "api/billing-api.md",
        "en",
        "# Billing API\n\nBase path /v2/invoices. Every API key may send 600 requests per minute; above that the API "
        "answers 429 with a Retry-After header. Amounts are integers in minor units (cents).\n",
    ),
    Item(
        "resources",
        "handbook/release-process.md",
        "en",
        "# Release process\n\n## Year-end freeze\nNo production releases from 18 December to 4 January. A fix "
        "during the freeze needs the approval of two directors and a rollback plan in the change ticket.\n\n"
        "## Hotfixes\nA hotfix branch is cut from the last release tag, reviewed by one maintainer of the service "
        "and deployed through the normal canary; it is merged back into main the same day.\n",
    ),
    Item(
        "resources",
        "architecture/data-retention.md",
        "en",
        "# Data retention\n\nApplication logs are kept for 60 days and traces for 7 days. Personal data of closed "
        "accounts is deleted after 13 months; invoices are kept for 10 years, as the tax law requires.\n",
    ),
    Item(
        "resources",
        "runbooks/kafka.md",
        "en",
        "# Kafka runbook\n\n## Reassigning partitions\nUse kafka-reassign-partitions with a throttle of 50 MB/s so "
        "that the brokers keep serving producers while the data moves; remove the throttle when the reassignment "
        "is verified.\n\n## Adding a broker\nA new broker gets no partitions by itself: generate a reassignment "
        "plan that includes it and run it during office hours, one topic at a time.\n",
    ),
    Item(
        "resources",
        "handbook/onboarding.md",
        "en",
        "# Onboarding checklist\n\nLaptops come from the IT helpdesk (tickets start with HW-). Every new engineer "
        "gets a buddy for three months and ships a first change in the first week.\n",
    ),
    Item(
        "resources",
        "meetings/platform-guild.md",
        "en",
        "# Platform guild\n\nThe guild meets every other Wednesday at 15:00 CET. Notes live in the Confluence "
        "space PLAT; anyone can add an agenda item until Tuesday evening.\n",
    ),
    Item(
        "resources",
        "glossary.md",
        "en",
        "# Glossary\n\nSEV1: a customer-facing outage that affects more than 5 % of checkouts. SEV2: a degraded "
        "service without data loss. Error budget: the share of requests an SLO allows to fail.\n",
    ),
    Item(
        "resources",
        "services/ledger-gateway-slo.md",
        "en",
        "# ledger-gateway SLOs\n\nAvailability 99.95 % per 30 days; p99 latency of reads 150 ms. The error-budget "
        "burn alert fires at 2 % of the budget per hour.\n",
    ),
    # resources, Chinese
    Item(
        "resources",
        "handbook/上海办公室指南.md",
        "zh",
        "# 上海办公室指南\n\n办公室在静安区南京西路 1788 号 23 楼。门禁卡找前台王阿姨办理，访客 Wi-Fi 名称是 NW-Guest，"
        "密码每周一更新，"
        "贴在前台。\n",
    ),
    Item(
        "resources",
        "runbooks/订单中心发布流程.md",
        "zh",
        "# 订单中心发布流程\n\n## 发布窗口\n订单中心只在每周二、周四晚上九点发布，节假日前一天不发布。"
        "发布前要在发布群里贴出变更单，并确认值班人在线，"
        "灰度机器观察十五分钟没有异常再全量。\n\n## 回滚\n出现异常时用发布平台的一键回滚回到上一个版本，"
        "回滚必须在十分钟内完成，完成后在发布群里说明原因。\n",
    ),
    Item(
        "resources",
        "规范/接口设计规范.md",
        "zh",
        "# 接口设计规范\n\n错误码统一为 E 加六位数字，例如 E100231；分页参数用 page_token，不用页码；时间字段一律用 "
        "ISO 8601 格式并带时区。\n",
    ),
    Item(
        "resources",
        "规范/数据库设计规范.md",
        "zh",
        "# 数据库设计规范\n\n表名和字段名用小写加下划线；单表超过 2000 万行要提前规划分表；禁止在线上库直接执行 DDL，"
        "必须走变更平台。\n",
    ),
    Item(
        "resources",
        "runbooks/风控引擎回滚.md",
        "zh",
        "# 风控引擎回滚\n\n规则发布后拦截率异常升高时，执行 riskctl rollback --to last-stable 回到上一个稳定版本，"
        "然后在风控值班群里通报。\n",
    ),
    Item(
        "resources",
        "handbook/上海报销制度.md",
        "zh",
        "# 上海办公室报销制度\n\n晚上九点以后下班可以报销打车费，每月上限 800 元；餐补每天 50 元，发票要在月底前提交。"
        "\n",
    ),
    Item(
        "resources",
        "规范/代码评审规范.md",
        "zh",
        "# 代码评审规范\n\n每个合并请求至少需要两名评审人批准，其中一人必须来自代码所属的团队；"
        "评审意见要在一个工作日内回复。\n",
    ),
    Item(
        "resources",
        "handbook/上海值班交接.md",
        "zh",
        "# 上海值班交接\n\n每周一上午十点在运维值班群里交接，交接内容包括未关闭的告警、进行中的变更和已知风险。"
        "值班手机由上一位值班人当面交给下一位。\n",
    ),
    Item(
        "resources",
        "services/短信平台.md",
        "zh",
        "# 短信平台\n\n新的短信模板需要审核，通常要两个工作日；验证码短信走专用通道，每个手机号每分钟最多发一条。\n",
    ),
    Item(
        "resources",
        "services/模型训练平台.md",
        "zh",
        "# 模型训练平台\n\n训练平台共有 32 张 A100，按团队分配配额。申请 GPU 要在平台上提交工单，由数据组负责人审批，"
        "单个任务最长运行 72 小时。\n",
    ),
    # skills, English: sections long enough to stay sections (a skill's body is served section by section)
    Item(
        "skills",
        "deploy-ledger-gateway",
        "en",
        _skill(
            "deploy-ledger-gateway",
            "Deploy ledger-gateway to production, with a canary at 10 % for 20 minutes, then the whole fleet.",
            "# Deploy ledger-gateway\n\n## Before you start\nCheck that main is green, that no change freeze is "
            "announced in the release channel and that the on-call engineer of Payments Core knows a deploy is coming. "
            "Deploys start before 16:00 Berlin time so that the canary finishes during office hours.\n\n"
            "## Steps\nFrom a clean main branch run make release ENV=prod. The pipeline builds the image, deploys the "
            "canary and waits for its checks; watch the canary dashboard while it runs and compare the error rate "
            "and the p99 latency with the rest of the fleet.\n\n"
            "## Abort\nIf the error rate of the canary passes 1 %, run make rollback ENV=prod, which puts the previous "
            "image back on the canary hosts, and write the reason in the release channel before you try again.\n",
        ),
    ),
    Item(
        "skills",
        "write-postmortem",
        "en",
        _skill(
            "write-postmortem",
            "Draft a blameless postmortem from an incident channel with timeline, impact, root cause, action items.",
            "# Write a postmortem\n\n## Input\nRead the incident channel from the first alert to the all-clear, the "
            "deploys and config changes of the two hours before it, and the pages that were sent. Quote every time in "
            "UTC and link each statement to the message it comes from.\n\n"
            "## Output\nEvery action item has an owner and a due date and is filed in the owning team's board. Share "
            "the draft with the incident commander before publishing it, and name systems and decisions, never "
            "people, as causes.\n",
        ),
    ),
    Item(
        "skills",
        "rotate-secret",
        "en",
        _skill(
            "rotate-secret",
            "Rotate a service secret in Vault and restart the pods that read it.",
            "# Rotate a secret\n\n## Steps\nWrite the new value with vault kv put secret/SERVICE/NAME value=NEW, then "
            "restart the service with kubectl rollout restart deploy/SERVICE and check its health endpoint until "
            "every pod reports ready. Services that read the secret at start only need the restart to see it.\n\n"
            "## Afterwards\nRevoke the old credential at its provider once the new one is in use everywhere, note the "
            "rotation in the service's changelog and close the security ticket that asked for it.\n",
        ),
    ),
    Item(
        "skills",
        "triage-flaky-test",
        "en",
        _skill(
            "triage-flaky-test",
            "Reproduce a flaky pytest test by running it many times with random ordering disabled.",
            "# Triage a flaky test\n\n## Reproduce\nRun pytest -p no:randomly --count 50 path/to/test.py::test_name "
            "and "
            "note how many runs fail. A failure that only shows with random ordering points at shared state between "
            "tests; one that shows either way usually depends on time, the network or a race.\n\n"
            "## Report\nFile the flaky test in the owning team's board with the failing seed, the failure rate and "
            "the log of one failed run, and mark it flaky in the CI configuration until it is fixed.\n",
        ),
    ),
    Item(
        "skills",
        "review-db-migration",
        "en",
        _skill(
            "review-db-migration",
            "Review a database migration for locks and rollbacks before it is merged.",
            "# Review a database migration\n\n## Checklist\nThe migration starts with SET lock_timeout = '3s', creates "
            "indexes concurrently, never rewrites a large table in one statement and has a tested reverse migration. "
            "Data backfills run in batches from a job, not inside the migration.\n\n"
            "## Sign-off\nA migration that touches billing tables also needs a review by the billing team, and one "
            "that drops a column ships only after a release in which no code reads that column any more.\n",
        ),
    ),
    Item(
        "skills",
        "summarize-alerts",
        "en",
        _skill(
            "summarize-alerts",
            "Summarise the last 24 hours of alerts for the on-call handover note, grouped by service.",
            "# Summarise alerts\n\n## Steps\nFetch the alerts from PagerDuty for the rotation's services, merge "
            "repeats "
            "of the same alert, and list the open ones first with their current owner. Alerts that fired and resolved "
            "by themselves more than three times are flagged as noisy.\n\n"
            "## Output\nA short note for the handover call, one line per service, with links to the incidents and to "
            "the changes that were running when the alerts fired.\n",
        ),
    ),
    # skills, Chinese
    Item(
        "skills",
        "weekly-report-zh",
        "zh",
        _skill(
            "weekly-report-zh",
            "生成中文周报：从 Jira 拉取本周完成的任务，按三段式整理后发到飞书群。",
            "# 生成周报\n\n## 步骤\n先按经办人筛选本周关闭的任务，再把进行中的任务按风险高低排序，最后整理成本周进展、"
            "风险和下周计划三段，每段不超过五条，"
            "用中文写，任务编号保留原样。\n\n## 注意\n涉及其他团队的任务要写清楚对接人和预计完成时间，"
            "风险要写明影响范围和需要谁支持，"
            "发出之前自己再从头读一遍，确认没有遗漏本周上线的变更。\n",
        ),
    ),
    Item(
        "skills",
        "order-trace",
        "zh",
        _skill(
            "order-trace",
            "排查订单问题：先用订单号查出调用链编号，再在日志平台查询整条调用链。",
            "# 排查订单问题\n\n## 命令\n运行 ordertool trace --order 订单号 得到 trace_id，然后在日志平台按 trace_id "
            "搜索，按时间顺序查看每个服务的日志，"
            "先看返回错误的那一跳。\n\n## 升级\n涉及资金的问题要马上在交易值班群里通报，并附上订单号、trace_id "
            "和出错的时间点；"
            "影响超过一百个订单时还要电话通知交易组负责人。\n",
        ),
    ),
    Item(
        "skills",
        "loadtest-prep",
        "zh",
        _skill(
            "loadtest-prep",
            "压测准备：提前三天在压测群报备，确认影子库和限流配置。",
            "# 压测准备\n\n## 检查项\n确认压测流量带有压测标记，写入影子库而不是生产库；确认下游服务的限流阈值，"
            "必要时临时调高；准备好一键停止压测的开关，"
            "并指定一名观察人盯住核心看板。\n\n## 结束\n压测结束后恢复限流配置，清理影子库里的压测数据，"
            "在压测群里贴出峰值、瓶颈和发现的问题，"
            "问题要建单并指定负责人。\n",
        ),
    ),
    Item(
        "skills",
        "zh-doc-review",
        "zh",
        _skill(
            "zh-doc-review",
            "中文文档校对：按术语表统一译名，英文产品名保持原文，不翻译。",
            "# 中文文档校对\n\n## 步骤\n先对照术语表统一译名，再检查中英文之间的空格和标点，数字和单位之间留一个空格，"
            "最后通读一遍看语句是否通顺，"
            "有疑问的地方用批注标出来。\n\n## 交付\n校对完成后把修改记录发给文档作者确认，作者同意以后再合并；"
            "术语表里没有的新词先记下来，每月和翻译组一起补充到术语表里。\n",
        ),
    ),
]


def _q(query: str, answer: str, item: str) -> Question:
    return Question(query, answer, item, "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in query) else "en")


def _none(query: str) -> Question:
    return Question(query, None, None, "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in query) else "en")


QUESTIONS = [
    # EN → EN
    _q("Which languages do I speak?", "Tamil", "profile.md"),
    _q("What does the billing team own?", "dunning worker", "billing-team.md"),
    _q("When is Tomasz's birthday?", "3 May", "tomasz-nowak.md"),
    _q("Which port does ledger-gateway serve gRPC on?", "8443", "ledger-gateway.md"),
    _q("How far ahead must I arrange an on-call swap?", "48 hours", "hannah-becker.md"),
    _q("What is the production Airflow cluster called?", "dp-airflow-prod", "data-platform-team.md"),
    _q("Where did I work with Marcus before?", "Kelvin Systems", "marcus-lindqvist.md"),
    _q("After how many days is a feature flag reported as stale?", "90 days", "flagpole.md"),
    _q("How does Ana want estimates?", "t-shirt sizes", "ana-souza.md"),
    _q("What is the e-mail rate limit of notify-hub?", "300 e-mails per second", "notify-hub.md"),
    _q("Who approves production access requests?", "Kwame Mensah", "kwame-mensah.md"),
    _q("Who is the current release captain of the mobile team?", "Femi Adeyemi", "mobile-team.md"),
    _q("How long are auth-service access tokens valid?", "15 minutes", "auth-service.md"),
    _q("What is the deadline of Project Kestrel?", "31 March 2027", "project-kestrel.md"),
    _q("When is my 1:1 with my manager?", "every other Friday at 14:00", "ravi.md"),
    _q("Who do I contact about SCIM provisioning?", "Sofia Marino", "sofia-marino.md"),
    _q("Who is our account manager at the hosting provider?", "Julia Fischer", "julia-fischer.md"),
    _q("How big should my pull requests be?", "under 400 changed lines", "pull-request-size.md"),
    _q("What line length do I use for Python code?", "line length 120", "python-style.md"),
    _q("How do I take my coffee?", "flat white with oat milk", "coffee.md"),
    _q("Until what time should nobody book meetings with me?", "10:00 Berlin time", "meeting-hours.md"),
    _q("How many duplicate invoices did INC-2291 send?", "312 duplicate invoices", "2026-09-14-duplicate-invoices.md"),
    _q("When does my promotion take effect?", "1 January 2027", "2026-10-20-performance-review.md"),
    _q("When is the Kafka upgrade maintenance window?", "02:00–04:00 UTC", "2026-11-12-kafka-upgrade.md"),
    _q("Which candidate did I recommend for the SRE role?", "Lena Vogt", "2026-11-18-sre-interview.md"),
    _q("When is my dentist appointment?", "9 December at 08:30", "2026-12-01-dentist.md"),
    _q("How long did the database failover drill take?", "4 min 12 s", "2026-07-15-failover-drill.md"),
    _q("When is the SOC 2 evidence due?", "15 December 2026", "2026-11-25-soc2-evidence.md"),
    _q("What is the Q1 latency goal for ledger-gateway?", "below 120 ms", "2026-10-28-q1-planning.md"),
    _q("How should I add an index to a large table?", "CREATE INDEX CONCURRENTLY", "index-on-large-tables.md"),
    _q("Why did the cert-manager renewals fail?", "Zone:DNS:Edit", "cert-manager-dns01.md"),
    _q("How fast must a SEV1 page be acknowledged?", "within 10 minutes", "handbook/oncall-policy.md"),
    _q("What is the hotel limit per night in Europe?", "180 EUR per night", "handbook/expense-policy.md"),
    _q("How do I rotate the Postmark key?", "notifyctl keys rotate --provider postmark", "runbooks/notify-hub.md"),
    _q("What is the rate limit of the billing API?", "600 requests per minute", "api/billing-api.md"),
    _q("How long do we keep invoices?", "10 years", "architecture/data-retention.md"),
    _q("What is the availability SLO of ledger-gateway?", "99.95 %", "services/ledger-gateway-slo.md"),
    _q("How long does the ledger-gateway canary run?", "10 % for 20 minutes", "deploy-ledger-gateway"),
    _q("How do I write a new secret into Vault?", "vault kv put", "rotate-secret"),
    _q("How do I reproduce a flaky pytest test?", "pytest -p no:randomly --count 50", "triage-flaky-test"),
    # ZH → ZH
    _q("风控组负责哪些服务？", "设备指纹服务", "risk-team.md"),
    _q("陈思远一般什么时候开评审会？", "周四下午", "chen-siyuan.md"),
    _q("订单库拆成了多少个分库？", "16 个分库", "order-center.md"),
    _q("提测要在什么时候之前提交？", "前一天下午五点前", "wang-xiaowen.md"),
    _q("星河数仓每天几点同步数据？", "凌晨四点", "xinghe-warehouse.md"),
    _q("上海的生产 Kubernetes 集群叫什么？", "sh-prod-02", "ops-team.md"),
    _q("李强以前做过什么工作？", "五年 DBA", "li-qiang.md"),
    _q("小蜜蜂接口的 QPS 上限是多少？", "QPS 上限 2000", "xiaomifeng.md"),
    _q("赵雅婷负责哪块产品？", "会员体系", "zhao-yating.md"),
    _q("凤凰计划第一阶段什么时候截止？", "2027 年 1 月 15 日", "phoenix-project.md"),
    _q("前端项目要迁移到哪个构建工具？", "Vite", "zhang-lei.md"),
    _q("我平时喜欢喝什么茶？", "铁观音", "tea.md"),
    _q("我的周报分哪几个部分？", "本周进展、风险、下周计划", "weekly-report-format.md"),
    _q("和上海同事开会我用什么软件？", "飞书视频会议", "meeting-tool.md"),
    _q("我的终端用什么字体？", "等距更纱黑体", "terminal.md"),
    _q("在上海出差我喜欢住在哪一带？", "静安寺附近", "shanghai-hotel.md"),
    _q("风控规则引擎准备迁移到什么？", "自研 DSL", "2026-10-09-risk-dsl.md"),
    _q("大促压测的峰值是多少？", "4.2 万 QPS", "2026-10-16-load-test.md"),
    _q("上次去上海出差参观了哪个机房？", "嘉定机房", "2026-11-03-shanghai-trip.md"),
    _q("双十一那天降级开关是几点打开的？", "21:47", "2026-11-11-double-eleven.md"),
    _q("凤凰计划第一个拆出来的是哪个服务？", "库存服务", "2026-11-27-phoenix-review.md"),
    _q("会员积分新规则哪天上线？", "12 月 18 日", "2026-12-02-points-rules.md"),
    _q("加了联合索引以后慢查询降到了多少？", "40 毫秒", "slow-sql.md"),
    _q("Redis 大 key 最后拆成了多少个分片？", "64 个分片", "redis-big-key.md"),
    _q("线上日志中文乱码是什么原因？", "LANG=C.UTF-8", "log-encoding.md"),
    _q("订单中心什么时候可以发布？", "每周二、周四晚上九点", "runbooks/订单中心发布流程.md"),
    _q("单表超过多少行需要分表？", "2000 万行", "规范/数据库设计规范.md"),
    _q("风控规则发布出问题怎么回滚？", "riskctl rollback --to last-stable", "runbooks/风控引擎回滚.md"),
    _q("晚上打车每个月最多能报销多少？", "每月上限 800 元", "handbook/上海报销制度.md"),
    _q("合并请求需要几个人批准？", "至少需要两名评审人", "规范/代码评审规范.md"),
    _q("上海值班每周什么时候交接？", "每周一上午十点", "handbook/上海值班交接.md"),
    _q("新的短信模板审核需要多久？", "两个工作日", "services/短信平台.md"),
    _q("单个训练任务最长能跑多久？", "72 小时", "services/模型训练平台.md"),
    _q("生成周报时任务从哪里拉？", "从 Jira 拉取本周完成的任务", "weekly-report-zh"),
    _q("排查订单问题时用什么命令查 trace_id？", "ordertool trace --order", "order-trace"),
    _q("校对中文文档时英文产品名要翻译吗？", "英文产品名保持原文", "zh-doc-review"),
    # ZH → EN
    _q("计费团队的频道是哪个？", "#billing-eng", "billing-team.md"),
    _q("ledger-gateway 除了我还有谁维护？", "Jonas Weber", "ledger-gateway.md"),
    _q("谁负责 PagerDuty 排班？", "Hannah Becker", "hannah-becker.md"),
    _q("Kestrel 项目要迁移到哪个数据库版本？", "PostgreSQL 16", "project-kestrel.md"),
    _q("我画架构图用什么？", "Mermaid", "diagrams.md"),
    _q("我写属性测试用什么库？", "hypothesis", "testing.md"),
    _q("五小时以内的出差我喜欢坐什么交通工具？", "train instead of flights", "business-travel.md"),
    _q("重复发票事故的根本原因是什么？", "no idempotency key", "2026-09-14-duplicate-invoices.md"),
    _q("团队在里斯本的会上决定采用什么可观测性方案？", "OpenTelemetry", "2026-10-02-lisbon-offsite.md"),
    _q("ledger-gateway 的 CI 是从哪个系统迁走的？", "Jenkins", "2026-11-05-ci-migration.md"),
    _q("黑客松上我们的项目叫什么名字？", "Pagerbot", "2026-09-30-hackathon.md"),
    _q("新的结账流程哪天上线？", "8 January 2027", "2026-11-20-checkout-launch.md"),
    _q("我的演讲被哪个会议接受了？", "Berlin Backend Summit", "2026-12-04-talk-accepted.md"),
    _q("内存泄漏修好后缓存换成了多大的 LRU？", "10,000 entries", "ledger-gateway-memory-leak.md"),
    _q("数据库连接耗尽之后用了什么方案解决？", "PgBouncer", "connection-exhaustion.md"),
    _q("SEV2 告警要在多长时间内确认？", "within 30 minutes", "handbook/oncall-policy.md"),
    _q("在中国出差酒店每晚最多报多少？", "1,200 CNY per night", "handbook/expense-policy.md"),
    _q("年底封版期间的修复要谁批准？", "two directors", "handbook/release-process.md"),
    _q("平台公会的会议记录放在哪个 Confluence 空间？", "Confluence space PLAT", "meetings/platform-guild.md"),
    _q("审查数据库迁移时 lock_timeout 应该设成多少？", "lock_timeout = '3s'", "review-db-migration"),
    # EN → ZH
    _q("Which floor is the risk team on in the Shanghai office?", "12 楼", "risk-team.md"),
    _q("Who is responsible for the order center service?", "刘洋", "order-center.md"),
    _q("What is the regression testing platform called?", "青鸟", "wang-xiaowen.md"),
    _q("What is the ops team's on-call chat group called?", "「运维值班」", "ops-team.md"),
    _q("When does our SMS provider's contract expire?", "2027 年 6 月 30 日", "yunxuntong.md"),
    _q("What is the timeout of the payment gateway's bank calls?", "800 毫秒", "pay-gateway.md"),
    _q("What am I allergic to?", "花生过敏", "food.md"),
    _q("How many new Chinese words do I learn each day?", "20 个生词", "learning-chinese.md"),
    _q("In which language do I write design documents?", "设计文档和周报用中文写", "writing-language.md"),
    _q("What score did I get in the HSK exam?", "251 分", "2026-09-22-hsk.md"),
    _q("What was added after the SMS delay incident?", "备用通道", "2026-08-30-sms-delay.md"),
    _q("Where did the Shanghai team go for the team outing?", "莫干山", "2026-10-25-team-outing.md"),
    _q("How many nodes will the Shanghai production cluster grow to?", "60 个节点", "2026-11-30-cluster-scale-up.md"),
    _q("In a gradual rollout, how long do I observe the first 5% of traffic?", "观察 30 分钟", "canary-release.md"),
    _q(
        "What time in Beijing are my meetings with the Shanghai colleagues?",
        "北京时间下午 3 点",
        "cross-timezone-meetings.md",
    ),
    _q("Which garbage collector did we switch the Java service to?", "G1 收集器", "java-full-gc.md"),
    _q("Who issues access cards at the Shanghai office?", "王阿姨", "handbook/上海办公室指南.md"),
    _q("What format do error codes have in our API guidelines?", "E 加六位数字", "规范/接口设计规范.md"),
    _q("How many A100 GPUs does the training platform have?", "32 张 A100", "services/模型训练平台.md"),
    _q("How many days before a load test must it be announced?", "提前三天", "loadtest-prep"),
    # unanswerable: plausible for this user, answered by nothing in the store
    _none("Who leads the iOS accessibility team?"),
    _none("What is the Wi-Fi password of the Berlin office?"),
    _none("Which GraphQL gateway version do we run?"),
    _none("When is the design team's offsite next year?"),
    _none("What is the licence plate of my car?"),
    _none("Who owns the search-indexer service?"),
    _none("What did the board decide about the Series C round?"),
    _none("What warehouse size does the Snowflake analytics account use?"),
    _none("When does my passport expire?"),
    _none("What is the minimum Android SDK version of the mobile app?"),
    _none("How much does the annual Datadog contract cost?"),
    _none("深圳办公室的地址是什么？"),
    _none("法务组的负责人是谁？"),
    _none("推荐系统用的是哪个向量数据库？"),
    _none("我女儿的生日是哪天？"),
    _none("公司年会在哪家酒店举办？"),
    _none("财务系统什么时候切换到 SAP？"),
    _none("广告投放平台每天的预算是多少？"),
    _none("北京团队的晨会几点开始？"),
    _none("安卓应用的崩溃率目标是多少？"),
    _none("数据标注外包给了哪家公司？"),
    _none("下个月去成都出差订的是哪家酒店？"),
]

BY_NAME = {item.name: item for item in ITEMS}


def group(question: Question) -> str:
    """EN→EN, ZH→ZH, ZH→EN, EN→ZH (question → item language), or "unanswerable EN" / "unanswerable ZH"."""
    if question.item is None:
        return f"unanswerable {question.language.upper()}"
    return f"{question.language.upper()}→{BY_NAME[question.item].language.upper()}"


def validate() -> None:
    """Every answer occurs (whitespace as an abstract collapses it) in its own item and in no other: otherwise an
    answer in `rendered` would not say which item was served."""
    if len(BY_NAME) != len(ITEMS):
        raise ValueError("item names must be unique")
    texts = {item.name: " ".join(item.text.split()) for item in ITEMS}
    for question in QUESTIONS:
        if question.item is None:
            continue
        holders = [name for name, text in texts.items() if question.answer in text]
        if holders != [question.item]:
            raise ValueError(
                f"{question.query!r}: answer {question.answer!r} is in {holders}, not only in {question.item!r}"
            )
