"""Stored contexts in the operations console: every account's memories, resources and skills, listed, searched,
filtered and diagnosed ("why did the agent not see X?"), and re-embedded, recounted or deleted through the services
the API uses. Contents are written through the API only: the detail page is read-only.

Built for a million nodes: the changelist never counts the whole table (`EstimatedCountPaginator`), every filter
and both searches are served by an index of `retrieval_context` (retrieval/models.py), and the list leaves the
texts and the vector unread. `bench/console.py` times it."""

import json
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin import ShowFacets
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.admin.views.main import ORDER_VAR, ChangeList
from django.contrib.auth import get_permission_codename
from django.contrib.postgres.search import SearchQuery
from django.core.paginator import Paginator
from django.db import connection, models
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils.functional import cached_property
from django.utils.html import format_html

from core.auth import Caller
from core.errors import OvsiteError
from retrieval import services
from retrieval.embedders import get_embedder
from retrieval.models import LEXICAL_CONFIG, SEARCH_PARTITIONS, Context, ProcessingTask
from retrieval.recount import recount_tokens, write_counter
from retrieval.uris import SCHEME, parse_stored_uri

# A filtered list is counted exactly up to this many rows (one scan of at most as many), beyond it estimated.
EXACT_COUNT_UP_TO = 1000
# An action takes at most this many nodes; the whole store has its commands (manage.py reembed, recount_tokens).
ACTION_LIMIT = 1000
# The detail page shows this much of a text; the API's content/read serves the whole of it.
SHOWN_CHARS = 20_000
# The actions a node's page offers as buttons, each posted to the changelist for this one node.
NODE_ACTIONS = (("reembed_nodes", "Re-embed"), ("recount_node_tokens", "Recount tokens"), ("delete_nodes", "Delete…"))
# The account filter's parameter (RelatedFieldListFilter's).
ACCOUNT_PARAM = "account__id__exact"
# Never read for the list: the three texts (a content may hold megabytes), the vector and the lexemes.
UNLISTED_FIELDS = ("abstract", "overview", "content", "embedding", "lexemes")


def planned_rows(queryset) -> int:
    """The planner's estimate of the rows `queryset` returns: EXPLAIN plans the statement without running it."""
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    return int((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]["Plan Rows"])


class EstimatedCountPaginator(Paginator):
    """A COUNT(*) over a million rows scans them all (≈ 0.1–0.5 s, more on a cold cache): the count is exact while
    the rows number EXACT_COUNT_UP_TO or fewer (a COUNT over a LIMITed subquery, which stops there), otherwise the
    planner's estimate (`estimated` is then True and the list says "about"). It is never below the rows that
    exist when they are few, so the admin never takes a large list for a one-page one and reads it whole."""

    estimated = False

    @cached_property
    def count(self) -> int:
        bounded = self.object_list[: EXACT_COUNT_UP_TO + 1].count()
        if bounded <= EXACT_COUNT_UP_TO:
            return bounded
        self.estimated = True
        return max(planned_rows(self.object_list), bounded)


class ContextChangeList(ChangeList):
    def get_queryset(self, request, exclude_parameters=None):
        if ACCOUNT_PARAM not in self.params:
            # Sorted by URI or last update only within an account: those indexes lead with it, and a sort across
            # accounts reads every row (1.2 s at a million). The headers offer it only then (get_sortable_by).
            self.params.pop(ORDER_VAR, None)
        return super().get_queryset(request, exclude_parameters).defer(*UNLISTED_FIELDS)


class AccountFilter(admin.RelatedFieldListFilter):
    """Django shows no related filter of a single choice, and then ignores its parameter; but one account is the
    common store, and choosing it is what puts the account first in the indexes a sort needs."""

    def has_output(self):
        return bool(self.lookup_choices)


def bucket_of(context_type: str, category: str) -> str:
    """The quota bucket (retrieval.models.SEARCH_PARTITIONS) of a node of this type and category."""
    if context_type == "resource":
        return "resources"
    if context_type == "skill":
        return "skills"
    if context_type == "memory" and category in ("events", "preferences", "experiences", "entities"):
        return category
    return "entities" if context_type == "memory" and category == "profile" else "other"


class BucketFilter(admin.SimpleListFilter):
    """The quota buckets, as the searches partition the store (each on the (account, type, category) index)."""

    title = "bucket"
    parameter_name = "bucket"

    def lookups(self, request, model_admin):
        return [(name, name) for name in SEARCH_PARTITIONS]

    def queryset(self, request, queryset):
        condition = SEARCH_PARTITIONS.get(self.value())
        return queryset if condition is None else queryset.filter(condition)


def text_query(term: str) -> SearchQuery:
    """`term` as the lexical index reads text (retrieval.models.Context.lexemes): Chinese, Japanese and Korean cut
    into pairs by ovsite_lexical, English stemmed; every word must match (web search syntax: "…", or, -)."""
    cut = models.Func(models.Value(term), function="ovsite_lexical", output_field=models.TextField())
    return SearchQuery(cut, config=LEXICAL_CONFIG, search_type="websearch")


def visibility_notes(node: Context, current_model: str) -> list[tuple[str, str]]:
    """Why a search would or would not return this node: (level, text) pairs, level one of Django's message tags
    (error, warning, info, success). Searches read ready nodes with a vector (retrieval.search.query.scoped_rows)
    of the caller's account, shared or the caller's own."""
    notes = []
    if node.state == "failed":
        notes.append(
            (
                "error",
                f"Failed after {node.attempts} attempt(s): {node.error or 'no error recorded'}. Searches skip it "
                "until it is processed again: fix the cause, then re-embed it.",
            )
        )
    elif node.state == "pending":
        notes.append(
            (
                "warning",
                "Pending: written, not yet summarised, counted and embedded. Searches skip it until its "
                "processing task has run (is the Celery worker up?).",
            )
        )
    if node.state == "ready" and node.embedding is None:
        if node.kind == "dir" and not node.content_hash and parse_stored_uri(node.uri).is_structural:
            notes.append(("info", "A container folder: never a search hit itself; the nodes below it are."))
        else:
            notes.append(("warning", "Ready but without a vector: vector searches cannot find it. Re-embed it."))
    if node.embedding is not None and node.embedding_model != current_model:
        notes.append(
            (
                "warning",
                f"Its vector is from {node.embedding_model or 'an unnamed model'}, while queries are embedded by "
                f"{current_model}: its distances mean nothing. Re-embed it.",
            )
        )
    if node.owner:
        notes.append(("info", f"Private to user {node.owner}: other users of {node.account} never see it."))
    if not any(level in ("error", "warning") for level, _ in notes) and node.embedding is not None:
        notes.insert(0, ("success", f"Ready and embedded by {current_model}: searches in {node.account} can find it."))
    return notes


def _admin_url(name: str, query: dict | None = None, args=None) -> str | None:
    try:
        url = reverse(f"admin:{name}", args=args)
    except NoReverseMatch:
        return None
    return f"{url}?{urlencode(query)}" if query else url


@admin.register(Context)
class ContextAdmin(admin.ModelAdmin):
    list_display = ("node_uri", "account", "node_type", "bucket", "state_shown", "tokens", "updated")
    list_display_links = ("node_uri",)
    list_select_related = ("account",)
    # Newest first by the primary key: an index scan at any size. By URI or last update within an account only.
    ordering = ("-id",)
    list_filter = (
        ("account", AccountFilter),
        "context_type",
        BucketFilter,
        "state",
        "kind",
        ("updated_at", admin.DateFieldListFilter),
    )
    show_facets = ShowFacets.NEVER  # a facet is a COUNT per choice over the filtered rows
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    search_fields = ("uri",)  # shows the search box; get_search_results decides what a term means
    search_help_text = (
        "A term starting with viking:// finds the nodes whose URI starts with it (the node and what is below it); "
        "any other term is a full-text search of abstract, overview and content, every word required."
    )
    actions = ("reembed_nodes", "recount_node_tokens", "delete_nodes")
    fieldsets = (
        (
            "Node",
            {
                "fields": (
                    "account",
                    "uri",
                    "parent",
                    "kind",
                    "context_type",
                    "bucket",
                    "category",
                    "owner",
                    "peer",
                    "tags",
                )
            },
        ),
        ("State", {"fields": ("state", "error", "attempts", "content_hash")}),
        ("Texts", {"fields": ("abstract_text", "overview_text", "content_text")}),
        ("Tokens", {"fields": ("abstract_tokens", "overview_tokens", "content_tokens")}),
        ("Vector", {"fields": ("vector",)}),
        ("Times", {"fields": ("created_at", "updated_at", "event_time")}),
    )
    readonly_fields = ("parent", "bucket", "abstract_text", "overview_text", "content_text", "vector")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        # Deleting goes through the API's service (`delete_nodes`), never Django's cascade of one row.
        return False

    def get_changelist(self, request, **kwargs):
        return ContextChangeList

    def get_sortable_by(self, request):
        return ("node_uri", "updated") if ACCOUNT_PARAM in request.GET else ()

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        if term.lower().startswith(SCHEME):
            # LIKE 'prefix%' on the (account, uri varchar_pattern_ops) index: what ls -r and rm -r scan. Stored URIs
            # spell the scheme in lower case.
            return queryset.filter(uri__startswith=SCHEME + term[len(SCHEME) :]), False
        return queryset.filter(lexemes=text_query(term)), False

    # List columns

    @admin.display(description="URI", ordering="uri")
    def node_uri(self, node):
        return node.uri

    @admin.display(description="type")
    def node_type(self, node):
        return node.context_type

    @admin.display(description="bucket")
    def bucket(self, node):
        return bucket_of(node.context_type, node.category)

    @admin.display(description="state", ordering="state")
    def state_shown(self, node):
        if node.state == "ready":
            return "ready"
        return format_html('<span class="context-state-{}" title="{}">{}</span>', node.state, node.error, node.state)

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, node):
        return node.updated_at

    @admin.display(description="tokens L0 / L1 / L2")
    def tokens(self, node):
        return f"{node.abstract_tokens} / {node.overview_tokens} / {node.content_tokens}"

    # Detail page

    @admin.display(description="parent")
    def parent(self, node):
        parent_id = (
            Context.objects.filter(account_id=node.account_id, uri=node.parent_uri).values_list("id", flat=True).first()
        )
        if parent_id is None:
            return node.parent_uri or "—"
        return format_html(
            '<a href="{}">{}</a>', _admin_url("retrieval_context_change", args=[parent_id]), node.parent_uri
        )

    def _text(self, text: str):
        more = len(text) - SHOWN_CHARS
        return format_html(
            '<div class="context-text">{}</div>{}',
            text[:SHOWN_CHARS],
            f"… {more:,} more characters (GET /api/v1/content/read serves the whole text)" if more > 0 else "",
        )

    @admin.display(description="abstract (L0)")
    def abstract_text(self, node):
        return self._text(node.abstract)

    @admin.display(description="overview (L1)")
    def overview_text(self, node):
        return self._text(node.overview)

    @admin.display(description="content (L2)")
    def content_text(self, node):
        return self._text(node.content)

    @admin.display(description="vector")
    def vector(self, node):
        current = get_embedder().model
        if node.embedding is None:
            return f"none (queries are embedded by {current})"
        return f"{node.embedding_model or 'unnamed model'}, {len(node.embedding)} dimensions (queries: {current})"

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None:
            below = {"account__id__exact": obj.account_id}
            context.update(
                notes=visibility_notes(obj, get_embedder().model),
                children_url=_admin_url("retrieval_context_changelist", {**below, "parent_uri": obj.uri}),
                below_url=_admin_url("retrieval_context_changelist", {**below, "q": obj.uri + "/"}),
                # The recall ledger (sessions_app) records each URI served to a session, by URI alone.
                ledger_url=_admin_url("sessions_app_recallledgerentry_changelist", {"uri": obj.uri}),
                changelist_url=_admin_url("retrieval_context_changelist"),
                action_checkbox_name=ACTION_CHECKBOX_NAME,
                node_actions=[(name, label) for name, label in NODE_ACTIONS if name in self.get_actions(request)],
            )
        return super().render_change_form(request, context, add, change, form_url, obj)

    # Actions

    def response_action(self, request, queryset):
        # Django would filter the primary key by a value that is not a number, and fail with a 500.
        if not all(pk.isdigit() for pk in request.POST.getlist(ACTION_CHECKBOX_NAME)):
            messages.error(request, "The selection holds something other than node ids; nothing was done.")
            return HttpResponseRedirect(request.get_full_path())
        return super().response_action(request, queryset)

    def _selected(self, request, queryset) -> list[Context] | None:
        """The selected nodes (no texts, no vector), or None with a message when there are none or more than
        ACTION_LIMIT."""
        nodes = list(
            queryset.select_related("account")
            .only("id", "uri", "kind", "content_hash", "owner", "account__name")
            .order_by("id")[: ACTION_LIMIT + 1]
        )
        if not nodes:
            messages.warning(request, "None of the selected nodes exists any more; nothing was done.")
            return None
        if len(nodes) > ACTION_LIMIT:
            messages.error(
                request,
                f"More than {ACTION_LIMIT:,} nodes selected: narrow the selection with the filters or a search, or "
                "use manage.py reembed / recount_tokens for the whole store. Nothing was done.",
            )
            return None
        return nodes

    def _log(self, request, nodes: list[Context], flag: int, message: str = "") -> None:
        if nodes:
            LogEntry.objects.log_actions(request.user.pk, nodes, flag, change_message=message, single_object=False)

    def has_process_permission(self, request):
        # The detail page is read-only for everyone (has_change_permission); the actions go by the model's
        # permissions, which a superuser holds and a view-only staff user does not.
        return request.user.has_perm(f"{self.opts.app_label}.{get_permission_codename('change', self.opts)}")

    def has_remove_permission(self, request):
        return request.user.has_perm(f"{self.opts.app_label}.{get_permission_codename('delete', self.opts)}")

    @admin.action(
        description="Re-embed selected nodes (processed again as a write: summary, token counts, vector)",
        permissions=["process"],
    )
    def reembed_nodes(self, request, queryset):
        nodes = self._selected(request, queryset)
        if nodes is None:
            return
        tasks = services.requeue([(n.account_id, n.owner, n.uri) for n in nodes], kind="reembed")
        self._log(request, nodes, CHANGE, "Re-embed queued.")
        # Where Celery runs tasks eagerly (development, tests) they are done by now; a worker runs them later.
        statuses = dict(ProcessingTask.objects.filter(id__in=[t.id for t in tasks]).values_list("id", "status"))
        failed = [str(task_id) for task_id, status in statuses.items() if status == "failed"]
        summary = f"Re-embedding {len(nodes)} node(s) in {len(tasks)} task(s)"
        if failed:
            messages.error(request, f"{summary}: task(s) {', '.join(failed)} failed; each node's page says why.")
        elif all(status == "done" for status in statuses.values()):
            messages.success(request, f"{summary}: done.")
        else:
            messages.success(request, f"{summary}: queued for the Celery worker.")

    @admin.action(description="Recount tokens of selected nodes (the deployment's tokenizer)", permissions=["process"])
    def recount_node_tokens(self, request, queryset):
        nodes = self._selected(request, queryset)
        if nodes is None:
            return
        counter = write_counter()
        changed = recount_tokens(counter=counter, ids=[n.id for n in nodes])
        self._log(request, nodes, CHANGE, f"Tokens recounted ({counter.version}).")
        messages.success(request, f"Recounted {len(nodes)} node(s) with {counter.version}: {changed} changed.")

    @admin.action(description="Delete selected nodes (a document with its sections)…", permissions=["remove"])
    def delete_nodes(self, request, queryset):
        nodes = self._selected(request, queryset)
        if nodes is None:
            return None
        if request.POST.get("post") != "yes":
            return self._confirm_delete(request, nodes)
        recursive = request.POST.get("recursive") == "on"
        removed, deleted, within, refused = 0, [], 0, []
        for node in sorted(nodes, key=lambda n: n.uri):  # a directory before what is below it
            if any(node.uri.startswith(gone.uri + "/") for gone in deleted):
                within += 1  # went with the directory or document above it
                continue
            caller = Caller(account_id=node.account_id, account=node.account.name, user_id=node.owner, role="root")
            try:
                result = services.remove(caller=caller, uri=node.uri, recursive=recursive)
            except OvsiteError as exc:  # a non-empty directory, a root, a node deleted meanwhile
                refused.append(f"{node.uri}: {exc.message}")
                continue
            deleted.append(node)
            removed += result["estimated_deleted_count"]
        self._log(request, deleted, DELETION)
        if deleted:
            selected = len(deleted) + within
            messages.success(request, f"Deleted {selected} selected node(s), {removed} with what was below them.")
        if refused:
            messages.error(request, "Not deleted: " + "; ".join(refused))
        return None

    def _confirm_delete(self, request, nodes: list[Context]) -> TemplateResponse:
        for node in nodes:
            below = Context.objects.filter(account_id=node.account_id, uri__startswith=node.uri + "/")
            node.below = below.values("id")[: EXACT_COUNT_UP_TO + 1].count()
            node.document = services.is_document(node)
        return TemplateResponse(
            request,
            "admin/retrieval/context/delete_nodes.html",
            {
                **self.admin_site.each_context(request),
                "title": "Delete stored contexts",
                "opts": self.opts,
                "nodes": sorted(nodes, key=lambda n: n.uri),
                "limit": EXACT_COUNT_UP_TO,
                "non_empty_directories": [n for n in nodes if n.kind == "dir" and not n.document and n.below],
                "action_checkbox_name": ACTION_CHECKBOX_NAME,
            },
        )
