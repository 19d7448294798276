"""Stored contexts in the admin console (retrieval/admin.py), through Django's test client as a superuser: the list,
both searches, every filter, the read-only detail page with its diagnosis, each action's effect in the database,
and that the list never counts the whole table."""

import datetime as dt
import re

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from core.auth import Caller
from core.models import Account, AccountUser
from retrieval import admin as contexts_admin
from retrieval.models import Context, ProcessingTask
from retrieval.recount import write_counter
from retrieval.services import FileWrite, write_files
from sessions_app.models import RecallLedgerEntry, Session
from tests.retrieval.test_section_ingest import runbook

CHANGELIST = "/admin/retrieval/context/"
KAFKA = "viking://resources/runbooks/kafka.md"
VACUUM = "viking://resources/runbooks/postgres.md"
BILLING = "viking://resources/billing-runbook.md"  # a document: one node per section below it
EDITOR = "viking://user/default/memories/preferences/editor.md"
LAUNCH = "viking://user/default/memories/events/2026/03/14/launch.md"
DEPLOY = "viking://user/default/skills/deploy/SKILL.md"
TEA = "viking://user/alice/memories/preferences/tea.md"  # account acme, private to alice
MIGRATION = "viking://resources/数据库/迁移.md"


@pytest.fixture
def store(api):
    """Nodes of every type in account `default` (dev mode) and a private memory of alice in account `acme`, all
    processed by the real write path."""
    api.write_all(
        {
            KAFKA: "Kafka consumer lag alerts fire above 10k messages. Restart the consumer group.",
            VACUUM: "Vacuum the bloated tables weekly; autovacuum thresholds are too lax for the ledger.",
            EDITOR: "The user prefers vim keybindings in every editor.",
            LAUNCH: "Billing 2.0 was launched on March 14 after the load test passed.",
            DEPLOY: "# Deploy\n\nRun the deploy pipeline from main; never deploy on Fridays.",
            MIGRATION: "数据库迁移在周二晚上进行，先备份再执行脚本。",
        }
    )
    api.write(BILLING, runbook())
    acme = Account.objects.create(name="acme")
    AccountUser.objects.create(account=acme, user_id="alice", role="user")
    alice = Caller(account_id=acme.id, account="acme", user_id="alice", role="user")
    write_files(caller=alice, writes=[FileWrite(uri=TEA, content="Alice drinks green tea, never coffee.")])
    return acme


def listed(response) -> list[str]:
    assert response.status_code == 200, response.content[:500]
    return [node.uri for node in response.context["cl"].result_list]


def node(uri: str, account: str = "default") -> Context:
    return Context.objects.get(account__name=account, uri=uri)


def change_url(uri: str, account: str = "default") -> str:
    return reverse("admin:retrieval_context_change", args=[node(uri, account).pk])


def act(operator, action: str, *uris: str, account: str = "default", **extra):
    ids = [node(uri, account).pk for uri in uris]
    return operator.post(CHANGELIST, {"action": action, "index": 0, "_selected_action": ids, **extra}, follow=True)


def shown_messages(response) -> list[tuple[str, str]]:
    return [(m.level_tag, m.message) for m in response.context["messages"]]


def full_counts(queries) -> list[str]:
    """The statements that count rows of retrieval_context without a LIMIT: a scan of every row they match."""
    return [
        q["sql"]
        for q in queries
        if re.search(r"COUNT\(", q["sql"], re.I) and "retrieval_context" in q["sql"] and "LIMIT" not in q["sql"]
    ]


# The list


def test_the_list_shows_account_type_bucket_uri_state_tokens_and_updated(operator, store):
    response = operator.get(CHANGELIST)
    uris = listed(response)
    assert set(uris) == set(Context.objects.values_list("uri", flat=True))
    assert uris == list(Context.objects.order_by("-id").values_list("uri", flat=True)[:100])
    page = response.content.decode()
    headers = re.findall(r'<div class="text">(?:<a [^>]*>|<span>)?([^<]+)', page)
    assert headers == ["URI", "Account", "Type", "Bucket", "State", "Tokens L0 / L1 / L2", "Updated"]
    kafka = node(KAFKA)
    row = re.search(rf"<tr>.*?{re.escape(KAFKA)}.*?</tr>", page, re.S).group(0)
    assert ">default<" in row and ">resource<" in row and ">resources<" in row and ">ready<" in row
    assert f"{kafka.abstract_tokens} / {kafka.overview_tokens} / {kafka.content_tokens}" in row
    tea_row = re.search(rf"<tr>.*?{re.escape(TEA)}.*?</tr>", page, re.S).group(0)
    assert ">acme<" in tea_row and ">preferences<" in tea_row


def test_the_list_never_counts_the_whole_table(operator, store):
    for query in ({}, {"state__exact": "ready"}, {"q": "viking://resources/"}, {"q": "kafka"}):
        with CaptureQueriesContext(connection) as queries:
            listed(operator.get(CHANGELIST, query))
        assert any('FROM "retrieval_context"' in q["sql"] for q in queries.captured_queries), query
        assert full_counts(queries.captured_queries) == [], query


def test_a_list_longer_than_the_exact_count_says_about_and_shows_its_first_page(operator, store, monkeypatch):
    monkeypatch.setattr(contexts_admin, "EXACT_COUNT_UP_TO", 3)
    response = operator.get(CHANGELIST)
    cl = response.context["cl"]
    assert cl.paginator.estimated and cl.result_count >= 4
    assert 'id="result-count">about ' in response.content.decode()
    assert len(listed(response)) == min(Context.objects.count(), 100)
    few = operator.get(CHANGELIST, {"kind__exact": "file", "context_type__exact": "skill"})
    assert not few.context["cl"].paginator.estimated and few.context["cl"].result_count == 1


# Searches


def test_a_viking_uri_finds_the_nodes_whose_uri_starts_with_it(operator, store):
    assert sorted(listed(operator.get(CHANGELIST, {"q": "viking://resources/runbooks/"}))) == [KAFKA, VACUUM]
    below = sorted(listed(operator.get(CHANGELIST, {"q": BILLING})))
    assert below[0] == BILLING and len(below) == 1 + Context.objects.filter(parent_uri=BILLING).count() > 2
    assert listed(operator.get(CHANGELIST, {"q": "viking://resources/runbooks/kafka.md"})) == [KAFKA]
    assert listed(operator.get(CHANGELIST, {"q": " VIKING://resources/runbooks/kafka.md "})) == [KAFKA]
    assert listed(operator.get(CHANGELIST, {"q": "viking://resources/runbooks/%"})) == []  # LIKE wildcards escaped


def holding(*words: str) -> set[str]:
    """The nodes whose abstract, overview or content holds every word: the file and the directories above it,
    whose overviews quote their children's abstracts."""
    return {
        row.uri
        for row in Context.objects.all()
        if all(word in f"{row.abstract} {row.overview} {row.content}".lower() for word in words)
    }


def test_other_text_is_a_full_text_search_of_the_three_levels(operator, store):
    found = set(listed(operator.get(CHANGELIST, {"q": "consumer lag"})))
    assert KAFKA in found and VACUUM not in found and found == holding("consumer", "lag")
    assert set(listed(operator.get(CHANGELIST, {"q": "alert"}))) == found  # stemmed: "alerts" is "alert"
    both = set(listed(operator.get(CHANGELIST, {"q": "consumer autovacuum"})))  # every word required
    assert KAFKA not in both and VACUUM not in both and both == holding("consumer", "autovacuum")
    assert TEA in listed(operator.get(CHANGELIST, {"q": "green tea"}))  # every account
    assert MIGRATION in listed(operator.get(CHANGELIST, {"q": "备份"}))  # Chinese, cut as the index cuts it
    assert listed(operator.get(CHANGELIST, {"q": "the"})) == []  # stop words only: nothing, not an error


def test_a_search_term_with_a_nul_character_is_a_message_not_a_500(operator, store):
    response = operator.get(CHANGELIST, {"q": "kafka\x00"})
    assert response.status_code == 200
    assert ("error", "Null characters are not allowed.") in shown_messages(response)


# Filters


@pytest.mark.parametrize(
    "query,expected",
    [
        ({"context_type__exact": "memory"}, {"context_type": "memory"}),
        ({"state__exact": "failed"}, {"state": "failed"}),
        ({"kind__exact": "dir"}, {"kind": "dir"}),
    ],
)
def test_each_field_filter_lists_exactly_its_nodes(operator, store, query, expected):
    Context.objects.filter(uri=VACUUM).update(state="failed", error="boom")
    assert set(listed(operator.get(CHANGELIST, query))) == set(
        Context.objects.filter(**expected).values_list("uri", flat=True)
    )


def test_the_account_filter_lists_one_account(operator, store):
    acme = store
    assert listed(operator.get(CHANGELIST, {"account__id__exact": acme.id})) == list(
        Context.objects.filter(account=acme).order_by("-id").values_list("uri", flat=True)
    )
    assert TEA in listed(operator.get(CHANGELIST, {"account__id__exact": acme.id}))
    assert TEA not in listed(operator.get(CHANGELIST, {"account__id__exact": Account.objects.get(name="default").id}))


@pytest.mark.parametrize(
    "bucket,expected",
    [
        ("events", {"context_type": "memory", "category": "events"}),
        ("preferences", {"context_type": "memory", "category": "preferences"}),
        ("skills", {"context_type": "skill"}),
        ("resources", {"context_type": "resource"}),
    ],
)
def test_the_bucket_filter_lists_a_quota_bucket(operator, store, bucket, expected):
    uris = listed(operator.get(CHANGELIST, {"bucket": bucket}))
    assert set(uris) == set(Context.objects.filter(**expected).values_list("uri", flat=True))
    assert {
        LAUNCH: "events",
        EDITOR: "preferences",
        TEA: "preferences",
        DEPLOY: "skills",
        KAFKA: "resources",
    }.keys() & set(uris)
    rows = operator.get(CHANGELIST, {"bucket": bucket}).content.decode()
    assert rows.count(f'<td class="field-bucket">{bucket}</td>') == len(uris)


def test_the_date_filter_lists_nodes_updated_in_the_period(operator, store):
    old = timezone.now() - dt.timedelta(days=30)
    Context.objects.filter(uri=KAFKA).update(updated_at=old)
    cl = operator.get(CHANGELIST).context["cl"]
    [date_filter] = [f for f in cl.filter_specs if f.title == "updated at"]
    [past_week] = [c["query_string"] for c in date_filter.choices(cl) if c["display"] == "Past 7 days"]
    week = listed(operator.get(CHANGELIST + past_week))
    assert KAFKA not in week and set(week) == set(Context.objects.exclude(uri=KAFKA).values_list("uri", flat=True))


def test_sorting_by_last_update_is_offered_within_an_account(operator, store):
    default = Account.objects.get(name="default")
    Context.objects.filter(uri=KAFKA).update(updated_at=timezone.now() + dt.timedelta(days=1))
    newest_id_first = list(Context.objects.order_by("-id").values_list("uri", flat=True))
    across = operator.get(CHANGELIST, {"o": "-7"})  # across accounts: a sort of every row, so not offered
    assert listed(across) == newest_id_first and "sortable" not in across.content.decode()
    within = operator.get(CHANGELIST, {"account__id__exact": default.id, "o": "-7"})
    assert listed(within)[0] == KAFKA and 'class="sortable column-updated sorted descending"' in within.content.decode()
    assert listed(within) == list(
        Context.objects.filter(account=default).order_by("-updated_at", "-id").values_list("uri", flat=True)
    )


def test_the_account_filter_applies_in_a_store_of_one_account(operator, store):
    Account.objects.filter(name="acme").delete()
    default = Account.objects.get(name="default")
    response = operator.get(CHANGELIST, {"account__id__exact": default.id, "o": "7"})
    assert 'data-filter-title="account"' in response.content.decode()  # Django hides a filter of one choice
    assert listed(response) == list(Context.objects.order_by("updated_at", "-id").values_list("uri", flat=True))


def test_children_of_a_directory_by_its_parent_uri(operator, store):
    assert sorted(listed(operator.get(CHANGELIST, {"parent_uri": "viking://resources/runbooks"}))) == [KAFKA, VACUUM]


# The detail page


def test_the_detail_page_shows_the_three_levels_the_vectors_model_and_dimension_never_the_vector(operator, store):
    kafka = node(KAFKA)
    response = operator.get(change_url(KAFKA))
    page = response.content.decode()
    assert response.status_code == 200
    assert kafka.abstract and kafka.abstract in page and kafka.content in page
    assert f"{kafka.embedding_model}, {len(kafka.embedding)} dimensions" in page
    assert f"{kafka.embedding[0]:.6f}"[:8] not in page
    assert 'name="_save"' not in page and "<textarea" not in page  # read-only: contents are written through the API
    assert "Ready and embedded by" in page
    assert reverse("admin:retrieval_context_change", args=[node("viking://resources/runbooks").pk]) in page


def test_a_long_content_is_shown_in_part(operator, api, store):
    api.write("viking://resources/long.md", "word " * 6000)  # 30,000 characters, one section
    page = operator.get(change_url("viking://resources/long.md")).content.decode()
    assert "… 10,000 more characters" in page


def test_a_failed_node_says_why_at_the_top(operator, store):
    Context.objects.filter(uri=KAFKA).update(state="failed", error="Timeout: the embedder did not answer", attempts=3)
    page = operator.get(change_url(KAFKA)).content.decode()
    notes = page[page.index('id="visibility"') : page.index('id="context_form"')]
    assert 'class="error">Failed after 3 attempt(s): Timeout: the embedder did not answer' in notes
    assert "Ready and embedded" not in notes


def test_the_notes_name_a_pending_node_a_private_one_a_container_and_another_models_vector(operator, store):
    Context.objects.filter(uri=EDITOR).update(state="pending")
    assert "Pending: written, not yet" in operator.get(change_url(EDITOR)).content.decode()
    assert (
        "Private to user alice: other users of acme never see it."
        in operator.get(change_url(TEA, "acme")).content.decode()
    )
    container = operator.get(change_url("viking://user/default/memories/events")).content.decode()
    assert "A container folder: never a search hit itself" in container
    Context.objects.filter(uri=VACUUM).update(embedding_model="old-model")
    assert (
        "Its vector is from old-model, while queries are embedded by"
        in operator.get(change_url(VACUUM)).content.decode()
    )


def test_the_detail_page_links_to_the_recall_ledger_and_what_is_below(operator, store):
    session = Session.objects.create(account=Account.objects.get(name="default"), session_id="s1", user="default")
    RecallLedgerEntry.objects.create(session=session, uri=KAFKA, detail="full", msg_index=4)
    page = operator.get(change_url(KAFKA)).content.decode()
    ledger = re.search(r'id="ledger-link" href="([^"]+)"', page).group(1).replace("&amp;", "&")
    ledger_page = operator.get(ledger)
    assert ledger_page.status_code == 200 and [e.uri for e in ledger_page.context["cl"].result_list] == [KAFKA]
    directory = operator.get(change_url("viking://resources/runbooks")).content.decode()
    children = re.search(r'id="children-link" href="([^"]+)"', directory).group(1).replace("&amp;", "&")
    assert sorted(listed(operator.get(children))) == [KAFKA, VACUUM]


# Actions


def test_reembed_processes_a_failed_node_again(operator, api, remote_embedder):
    remote_embedder.script.mode = "error"
    api.write(KAFKA, "Kafka consumer lag alerts fire above 10k messages.")
    assert node(KAFKA).state == "failed"
    remote_embedder.script.mode = "ok"
    response = act(operator, "reembed_nodes", KAFKA)
    kafka = node(KAFKA)
    assert kafka.state == "ready" and kafka.error == "" and kafka.embedding_model == "fake-embedding"
    assert ("success", "Re-embedding 1 node(s) in 1 task(s): done.") in shown_messages(response)
    assert ProcessingTask.objects.filter(kind="reembed", uris=[KAFKA], status="done").exists()
    assert LogEntry.objects.filter(object_id=str(kafka.pk), action_flag=CHANGE).exists()


def test_a_reembed_that_fails_says_so(operator, api, remote_embedder):
    api.write(KAFKA, "Kafka consumer lag alerts fire above 10k messages.")
    remote_embedder.script.mode = "error"
    response = act(operator, "reembed_nodes", KAFKA)
    [(level, message)] = shown_messages(response)
    assert level == "error" and message.startswith("Re-embedding 1 node(s) in 1 task(s): task(s) ")
    assert node(KAFKA).state == "failed" and "InternalServerError" in node(KAFKA).error


def test_recount_restores_the_stored_token_counts(operator, store):
    Context.objects.filter(uri__in=[KAFKA, EDITOR]).update(abstract_tokens=0, content_tokens=99999)
    response = act(operator, "recount_node_tokens", KAFKA, EDITOR)
    counter = write_counter()
    for uri in (KAFKA, EDITOR):
        row = node(uri)
        assert (row.abstract_tokens, row.content_tokens) == (counter.count(row.abstract), counter.count(row.content))
    assert ("success", f"Recounted 2 node(s) with {counter.version}: 2 changed.") in shown_messages(response)


def test_delete_asks_first_then_deletes_a_document_with_its_sections(operator, store):
    sections = Context.objects.filter(parent_uri=BILLING).count()
    confirm = act(operator, "delete_nodes", BILLING)
    page = confirm.content.decode()
    assert confirm.status_code == 200 and "document" in page and f"<td>{sections}</td>" in page
    assert Context.objects.filter(uri=BILLING).exists()  # nothing deleted before the confirmation
    response = act(operator, "delete_nodes", BILLING, post="yes")
    assert not Context.objects.filter(uri__startswith=BILLING).exists()
    assert ("success", f"Deleted 1 selected node(s), {1 + sections} with what was below them.") in shown_messages(
        response
    )
    assert ProcessingTask.objects.filter(kind="rm", uris=["viking://resources"]).exists()  # its parent refreshed
    assert LogEntry.objects.filter(action_flag=DELETION, object_repr=BILLING).exists()


def test_delete_keeps_a_non_empty_directory_unless_asked_for_everything_below(operator, store):
    runbooks = "viking://resources/runbooks"
    assert 'name="recursive"' in act(operator, "delete_nodes", runbooks).content.decode()
    response = act(operator, "delete_nodes", runbooks, post="yes")
    assert Context.objects.filter(uri=KAFKA).exists()
    assert shown_messages(response) == [
        ("error", f"Not deleted: {runbooks}: {runbooks} is not empty; pass recursive=true")
    ]
    response = act(operator, "delete_nodes", runbooks, KAFKA, post="yes", recursive="on")
    assert not Context.objects.filter(uri__startswith=runbooks).exists()
    assert shown_messages(response) == [("success", "Deleted 2 selected node(s), 3 with what was below them.")]


def test_delete_of_a_root_is_refused_with_a_message(operator, store):
    response = act(operator, "delete_nodes", "viking://resources", post="yes", recursive="on")
    [(level, message)] = shown_messages(response)
    assert level == "error" and message.startswith("Not deleted: viking://resources: ")
    assert Context.objects.filter(uri=KAFKA).exists()


def test_an_action_over_the_limit_does_nothing_and_says_why(operator, store, monkeypatch):
    monkeypatch.setattr(contexts_admin, "ACTION_LIMIT", 1)
    Context.objects.filter(uri__in=[KAFKA, VACUUM]).update(content_tokens=99999)
    response = act(operator, "recount_node_tokens", KAFKA, VACUUM)
    [(level, message)] = shown_messages(response)
    assert level == "error" and message.startswith("More than 1 nodes selected")
    assert set(Context.objects.filter(uri__in=[KAFKA, VACUUM]).values_list("content_tokens", flat=True)) == {99999}


def test_an_action_on_every_match_of_a_search_takes_the_search(operator, store):
    Context.objects.update(content_tokens=99999)
    response = operator.post(
        CHANGELIST + "?q=viking://resources/runbooks/",
        {"action": "recount_node_tokens", "index": 0, "select_across": 1, "_selected_action": [node(KAFKA).pk]},
        follow=True,
    )
    assert ("success", f"Recounted 2 node(s) with {write_counter().version}: 2 changed.") in shown_messages(response)
    assert Context.objects.filter(content_tokens=99999).count() == Context.objects.count() - 2


@pytest.mark.parametrize("selected", [["abc"], ["1e3"], [""]])
def test_a_malformed_selection_is_a_message_not_a_500(operator, store, selected):
    response = operator.post(
        CHANGELIST, {"action": "recount_node_tokens", "index": 0, "_selected_action": selected}, follow=True
    )
    assert response.status_code == 200
    assert [level for level, _ in shown_messages(response)] in (["error"], ["warning"])


def test_a_selection_that_no_longer_exists_is_a_message(operator, store):
    gone = node(KAFKA).pk
    Context.objects.filter(pk=gone).delete()
    response = operator.post(
        CHANGELIST, {"action": "reembed_nodes", "index": 0, "_selected_action": [gone]}, follow=True
    )
    assert shown_messages(response) == [("warning", "None of the selected nodes exists any more; nothing was done.")]
    assert not ProcessingTask.objects.filter(kind="reembed").exists()


def test_nothing_is_added_edited_or_deleted_by_django_itself(operator, store):
    kafka = node(KAFKA)
    assert operator.get("/admin/retrieval/context/add/").status_code == 403
    assert operator.get(f"/admin/retrieval/context/{kafka.pk}/delete/").status_code == 403
    before = kafka.content
    operator.post(change_url(KAFKA), {"content": "changed", "uri": KAFKA})
    assert node(KAFKA).content == before
    actions = operator.get(CHANGELIST).context["action_form"].fields["action"].choices
    assert "delete_selected" not in [name for name, _ in actions]


def test_a_view_only_staff_user_browses_but_runs_no_action(store):
    viewer = User.objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_context"))
    client = Client()
    client.force_login(viewer)
    response = client.get(CHANGELIST)
    assert KAFKA in listed(response) and response.context["action_form"] is None
    page = client.get(change_url(KAFKA)).content.decode()
    assert 'id="visibility"' in page and 'id="node-' not in page  # the diagnosis, no action buttons
    act(client, "delete_nodes", KAFKA, post="yes")
    assert Context.objects.filter(uri=KAFKA).exists()
