"""Sessions, their messages, their commits and the recall ledger (docs/design.md §3)."""

from django.contrib.postgres.fields import ArrayField
from django.db import models

from core.models import Account


class Session(models.Model):
    """One conversation of one user. `total_message_count` is the turn clock: it only ever grows.

    A session id is unique per user, not per account: were it per account, another user's id would answer
    `409`/`404` where a free id answers `200`, telling a user which ids their colleagues use."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="sessions")
    session_id = models.CharField(max_length=128)
    user = models.CharField(max_length=64)
    total_message_count = models.PositiveIntegerField(
        default=0, help_text="Messages ever added; never decreases, so the recall ledger can count turns by it."
    )
    archive_overview = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["account", "user", "session_id"], name="session_unique_per_user")
        ]
        indexes = [models.Index(fields=["account", "user", "-updated_at"], name="session_user_recent")]

    def __str__(self):
        return self.session_id


class Message(models.Model):
    ROLE_CHOICES = [("user", "user"), ("assistant", "assistant"), ("system", "system"), ("tool", "tool")]

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    index = models.PositiveIntegerField(help_text="0-based: the session's total_message_count before the insert.")
    role = models.CharField(max_length=16, choices=ROLE_CHOICES)
    content = models.TextField(
        blank=True, default="", help_text="The text parts joined by newlines when the client sent parts."
    )
    parts = models.JSONField(default=list, blank=True, help_text="The typed parts as sent; empty for plain content.")
    peer_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "index"], name="message_index_unique")]

    def __str__(self):
        return f"{self.session.session_id}#{self.index} {self.role}"


class Commit(models.Model):
    """One session commit (docs/design.md §6): what it archived and what memory extraction made of it. Its id is the
    `ProcessingTask` a client polls; this row keeps the commit's own answer, for a queued commit too."""

    STEP_CHOICES = [
        ("pending", "pending"),
        ("off", "off: no LLM"),
        ("skipped", "skipped: nothing archived"),
        ("ok", "ok"),
        ("failed", "failed"),
    ]

    id = models.UUIDField(primary_key=True)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="commits")
    archive_before = models.PositiveIntegerField(help_text="Messages with a lower index are archived.")
    event_tags = ArrayField(
        models.CharField(max_length=64),
        default=list,
        blank=True,
        help_text="Tags for the event memories, from the request's extraction_metadata.",
    )
    actor_peer = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="The commit request's X-OpenViking-Actor-Peer: the peer of the extracted memories when the "
        'archived messages do not name exactly one (docs/retrieval.md, "Peers").',
    )
    archived_messages = models.PositiveIntegerField(default=0)
    archived_at = models.DateTimeField(null=True, blank=True)
    archive_summary = models.CharField(
        max_length=8,
        choices=STEP_CHOICES,
        default="pending",
        help_text="The LLM-condensed archive overview; without it the digest stays.",
    )
    extraction = models.CharField(max_length=8, choices=STEP_CHOICES, default="pending")
    memories_extracted = models.PositiveIntegerField(default=0, help_text="Memory files written (new or updated).")
    memories_deduplicated = models.PositiveIntegerField(default=0, help_text="Not written: a near-duplicate exists.")
    memories_skipped = models.PositiveIntegerField(default=0, help_text="Invalid items of the LLM's answer.")
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"{self.session.session_id} commit {self.id}"


class RecallLedgerEntry(models.Model):
    """One URI served to a session at one tier on one turn; read by cross-turn dedup, pruned on write."""

    DETAIL_CHOICES = [("full", "full"), ("overview", "overview"), ("abstract", "abstract"), ("uri", "uri")]

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="ledger")
    uri = models.CharField(max_length=1024)
    detail = models.CharField(max_length=8, choices=DETAIL_CHOICES)
    msg_index = models.PositiveIntegerField(help_text="The session's total_message_count when the URI was served.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["session", "msg_index"], name="ledger_session_turn")]
        verbose_name_plural = "recall ledger entries"

    def __str__(self):
        return f"{self.uri} @ {self.msg_index} ({self.detail})"
