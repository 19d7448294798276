"""The SQL of a search: k-nearest scans of the HNSW indexes, full-text scans of the lexical index, and the one
statement (one round trip) that runs them all (docs/retrieval.md)."""

import itertools
from dataclasses import dataclass
from functools import cache

import numpy as np
from django.conf import settings
from django.db.backends.postgresql.base import ServerBindingCursor

from core.replicas import read_cursor
from retrieval.models import LEXICAL_CONFIG
from retrieval.search.query import Predicate, partition_predicate, store_stop_words, store_term_shares

HIT_COLUMNS = ("uri", "kind", "context_type", "category", "abstract", "tags")
EVERYTHING = "all"  # a scan of the whole scope, no partition
TABLE = '"retrieval_context"'
LEXEMES = '"retrieval_context"."lexemes"'


@dataclass(frozen=True)
class SearchQuery:
    """One query of a search: its text for the lexical side, its embedding for the vector side."""

    text: str
    vector: object


@dataclass(frozen=True)
class Statement:
    """A search's scans as one statement: the ranked selects and the named subqueries of its WITH clause."""

    nearest: list[Predicate]
    lexical: list[Predicate]
    common: tuple[Predicate, ...]


def shared_vector(name: str, vector, ef_search: int) -> tuple[Predicate, Predicate]:
    """(a named subquery holding the vector, the expression that reads it). A statement with several scans of one
    query vector then carries its ~7 KB of text once instead of once per scan; the HNSW scans take the read as a
    one-time parameter, as they would a literal.

    Reading the vector also sets `hnsw.ef_search` for the rest of the transaction, which is the statement alone
    outside an atomic block: each HNSW scan computes its query vector before it walks the graph, so every scan of
    the statement walks at `ef_search`, whatever the connection's, and no SET before and after costs two round
    trips. A statement in an atomic block leaves it set until the block ends; the next search sets its own."""
    ef = f"(SELECT set_config('hnsw.ef_search', '{int(ef_search)}', true)) AS ef"
    return (
        Predicate(f"{name} AS MATERIALIZED (SELECT %s::vector AS vector FROM {ef})", (vector_text(vector),)),
        Predicate(f"(SELECT vector FROM {name})"),
    )


# A term more than this share of the store holds is a stop word of this store (PostgreSQL's statistics of the
# lexemes column, kept by ANALYZE): it weighs next to nothing in BM25, yet matching it means ranking that share of
# the store ("user" is in 36 % of bench/find_latency.py's corpus, "summari" in 69 %).
COMMON_TERM_SHARE = 0.2
# Below this many searchable nodes in the scope a store has no stop words: ranking every node that holds a common
# term costs little there, and a share of a few nodes (one of four holds "caddy") says nothing of the language —
# nor do the table's statistics, which may date from when it held other things.
STOP_WORDS_FROM = 1000


def broad_terms(scope_size: int) -> tuple[list[str], list[float]]:
    """The store's lexemes that more than OVSITE_LEXICAL_TERM_MATCHES_MAX nodes of a scope of `scope_size` hold by
    the statistics (`store_term_shares`), stop words aside, with that estimate of their holders."""
    broader = itertools.takewhile(  # most common first: read no further than the last broad term
        lambda common: common[1] * scope_size > settings.LEXICAL_TERM_MATCHES_MAX, store_term_shares()
    )
    wide = [(term, share * scope_size) for term, share in broader if share <= COMMON_TERM_SHARE]
    return [term for term, _ in wide], [holders for _, holders in wide]


def lexical_terms(
    index: int,
    text: str,
    scope: Predicate,
    buckets: list[str],
    scope_size: int,
    stop_words: bool = True,
    capped: bool = False,
    small_scope: bool = False,
) -> list[Predicate]:
    """The named subqueries of query `index`'s lexical side (docs/retrieval.md, "Search modes"):

    - terms_i: the query's distinct lexemes but the store's stop words (with `stop_words`: those of
      `retrieval.search.query.store_stop_words`, a parameter) (`terms`), and `match`, any of them (OR):
      a question rarely shares all its words with the memory that answers it, and AND-ing them matched almost
      nothing on conversational memory. With `capped` (a hybrid search), `match` leaves out the broad terms
      (`broad_terms`): ranking every node that holds one costs time in proportion to the store (385 ms a /find at
      a million nodes), while the vector side brings candidates that hold them and their coverage still counts;
    - matched_i: every node of `scope` holding a term of `match` (the GIN index finds them), its lexeme count, the
      terms it holds, and its bucket (one of `buckets`; NULL for a node in none, which still counts for the
      frequencies). With `small_scope` (a small tenant's, `retrieval.search.query.exact_search`) the match is
      tested on each row of the scope instead (`IS TRUE`, which no index serves): the GIN index would list every
      holder in the table, other accounts' too (18,000 rows, 8 ms for a tenant of 107 nodes among 400,000);
    - idf_i: each term's inverse document frequency, BM25's ln(1 + (N − df + 0.5) / (df + 0.5)), df counted
      among the matches (a broad term's: the statistics' estimate) and N the scope's size (`scope_size`, or the
      matches when more): a term that most nodes hold (the user, 用户) weighs little beside a name that few hold,
      which ts_rank cannot do. Counted in the account, it answers the same whatever other accounts hold. Each
      term's df is counted once (OFFSET 0: the formula reads df twice, and inlined it would count the matches twice
      per term)."""
    common = "AND term <> ALL(%s::text[])" if stop_words else ""
    broad, broad_holders = broad_terms(scope_size) if capped and stop_words else ([], [])
    bucket = (
        "'all'"
        if buckets == [EVERYTHING]
        else "CASE "
        + " ".join(f"WHEN {partition_predicate(name).sql} THEN {_label(name)}" for name in buckets)
        + " END"
    )
    return [
        # A lexeme is quoted for the tsquery as a literal is for SQL (a quote doubled); the rare one holding a
        # backslash, which the two quote differently, is left out. OFFSET 0 keeps the kept terms one subquery,
        # computed once, where the planner would inline it into each of its three uses.
        Predicate(
            f"terms_{index} AS MATERIALIZED (SELECT coalesce(array_to_string(ARRAY(SELECT quote_literal(term) "
            f"FROM unnest(kept) AS term WHERE term <> ALL(%s::text[])), ' | '), '')::tsquery AS match, kept AS "
            "terms, ARRAY(SELECT "
            f"quote_literal(term)::tsquery FROM unnest(kept) AS term) AS probes FROM (SELECT ARRAY(SELECT term "
            f"FROM unnest(tsvector_to_array(to_tsvector('{LEXICAL_CONFIG}', ovsite_lexical(%s)))) AS term "
            f"WHERE strpos(term, chr(92)) = 0 {common}) AS kept OFFSET 0) AS query_terms)",
            (broad, text, store_stop_words(COMMON_TERM_SHARE)) if stop_words else (broad, text),
        ),
        # A node's terms by one tsvector probe each (a binary search), not a scan of all its lexemes.
        Predicate(
            f'matched_{index} AS MATERIALIZED (SELECT {TABLE}."id", length({LEXEMES}) AS size, '
            f"ARRAY(SELECT term FROM unnest((SELECT terms FROM terms_{index}), (SELECT probes FROM "
            f"terms_{index})) AS probe(term, query) WHERE {LEXEMES} @@ probe.query) AS hits, {bucket} AS bucket "
            f"FROM {TABLE} WHERE ({scope.sql}) AND ({LEXEMES} @@ (SELECT match FROM terms_{index}))"
            f"{' IS TRUE' if small_scope else ''})",
            scope.params,
        ),
        Predicate(
            f"idf_{index} AS MATERIALIZED (SELECT term, probe, ln(1 + (greatest(%s, (SELECT count(*) FROM "
            f"matched_{index})) - df + 0.5) / (df + 0.5))::float8 AS idf FROM (SELECT term, probe, coalesce(("
            "SELECT holders FROM unnest(%s::text[], %s::float8[]) AS broad(broad_term, holders) WHERE broad_term "
            f"= given.term), (SELECT count(*) FROM matched_{index} WHERE term = ANY(hits))::float8) AS df FROM "
            f"unnest((SELECT terms FROM terms_{index}), (SELECT probes FROM terms_{index})) AS given(term, probe) "
            "OFFSET 0) AS counted)",
            (scope_size, broad, broad_holders),
        ),
    ]


def _columns(columns: tuple[str, ...], table: str) -> str:
    return ", ".join(f'{table}."{column}"' for column in columns)


def _label(label: str) -> str:
    if not label.isidentifier():
        raise ValueError(f"scan label {label!r}")
    return f"'{label}'"


def _coverage(lexemes: str, index: int | None) -> str:
    """The share of query `index`'s information (the sum of its terms' idf) that a node's lexemes hold; NULL
    without a lexical side."""
    if index is None:
        return "NULL::real"
    return (
        f"((SELECT coalesce(sum(idf), 0) FROM idf_{index} WHERE {lexemes} @@ probe) "
        f"/ (SELECT greatest(sum(idf), 1e-9) FROM idf_{index}))::real"
    )


def nearest_select(
    where: Predicate,
    vector: Predicate,
    columns: tuple[str, ...],
    limit: int,
    label: str,
    query: int = 0,
    gate: bool = False,
    lexical: bool = False,
    exact: bool = False,
) -> Predicate:
    """One k-nearest select under `where`, ordered by cosine distance (the HNSW index order), with each row's
    coverage of the query's terms when the search has a `lexical` side.

    With `gate`, an uncorrelated EXISTS runs first as a one-time filter: an empty bucket then costs one index
    probe instead of an iterative HNSW scan that walks the whole index looking for rows that are not there.

    The limit is written in, not a parameter: for `LIMIT $n` a generic plan assumes a tenth of the table will be
    read, costs itself above the custom plans, and PostgreSQL then plans every execution of the prepared statement
    anew (0.55–1.2 ms a hybrid search at 10k nodes; bench/RESULTS.md, request_path). A few limits, a few texts.

    With `exact`, every row under `where` is sorted by distance (`exact_nearest`): no graph is walked."""
    if exact:
        return exact_nearest(where, vector, columns, limit, label, query, lexical)
    gate_sql = f' AND EXISTS (SELECT 1 FROM "retrieval_context" WHERE {where.sql})' if gate else ""
    sql = (
        f"(SELECT {_columns(columns, TABLE)}, "
        f'("retrieval_context"."embedding" <=> {vector.sql}) AS distance, {_label(label)} AS bucket, '
        f"{int(query)} AS query, NULL::real AS lexical_rank, "
        f"{_coverage(LEXEMES, query if lexical else None)} "
        f'AS coverage FROM "retrieval_context" WHERE ({where.sql}){gate_sql} ORDER BY distance LIMIT {int(limit)})'
    )
    return Predicate(sql, vector.params + where.params + (where.params if gate else ()))


def exact_nearest(
    where: Predicate, vector: Predicate, columns: tuple[str, ...], limit: int, label: str, query: int, lexical: bool
) -> Predicate:
    """`nearest_select`'s rows found exactly: each row under `where` (a small tenant's, which its account's B-tree
    finds) with its distance, in a subquery the planner cannot flatten (OFFSET 0), so its ORDER BY cannot be served
    by an HNSW index; the `limit` nearest ids are sorted out of them, then their columns read. The distance is
    computed once a row and the columns and coverage only for the rows kept."""
    sql = (
        f"(SELECT {_columns(columns, TABLE)}, nearest.distance, {_label(label)} AS bucket, {int(query)} AS query, "
        f"NULL::real AS lexical_rank, {_coverage(LEXEMES, query if lexical else None)} AS coverage "
        f'FROM (SELECT "id", distance FROM (SELECT {TABLE}."id", ({TABLE}."embedding" <=> {vector.sql}) AS distance '
        f"FROM {TABLE} WHERE ({where.sql}) OFFSET 0) AS scored ORDER BY distance, id LIMIT {int(limit)}) AS nearest "
        f'JOIN {TABLE} ON {TABLE}."id" = nearest."id" ORDER BY nearest.distance, {TABLE}."id")'
    )
    return Predicate(sql, vector.params + where.params)


# BM25's constants (Robertson and Zaragoza): term frequency saturates at k1, b scales by length. Each term counts
# once per node (a binary tf: a memory's abstract repeats its content), so a node's BM25 is the idf of the terms it
# holds times a length factor.
BM25_K1, BM25_B = 1.2, 0.75


def lexical_select(index: int, vector: Predicate, columns: tuple[str, ...], counts: list[tuple[str, int]]) -> Predicate:
    """Query `index`'s best full-text matches by BM25, `count` per bucket of `counts` (EVERYTHING: all one), with
    each one's cosine distance to the query vector (its score) and its coverage."""
    room = (
        f"{counts[0][1]}"
        if counts[0][0] == EVERYTHING
        else "CASE ranked.bucket "
        + " ".join(f"WHEN {_label(name)} THEN {int(count)}" for name, count in counts)
        + " END"
    )
    bm25 = (
        f"matches.weight * {BM25_K1 + 1} / (1 + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * matches.size "
        "/ greatest(corpus.mean_size, 1)))"
    )
    sql = (
        f'(SELECT {_columns(columns, TABLE)}, ({TABLE}."embedding" <=> {vector.sql}) AS distance, '
        f"ranked.bucket, {int(index)} AS query, ranked.bm25::real AS lexical_rank, "
        f"ranked.coverage::real AS coverage "
        f"FROM (SELECT matches.id, matches.bucket, {bm25} AS bm25, matches.weight / corpus.total AS coverage, "
        f"row_number() OVER (PARTITION BY matches.bucket ORDER BY {bm25} DESC, matches.id) AS place "
        f"FROM (SELECT id, bucket, size, (SELECT coalesce(sum(idf), 0) FROM idf_{index} WHERE term = ANY(hits)) "
        f"AS weight FROM matched_{index} WHERE bucket IS NOT NULL) AS matches, "
        f"(SELECT avg(size) AS mean_size, (SELECT greatest(sum(idf), 1e-9) FROM idf_{index}) AS total "
        f"FROM matched_{index}) AS corpus) AS ranked "
        f'JOIN {TABLE} ON {TABLE}."id" = ranked.id WHERE ranked.place <= {room})'
    )
    return Predicate(sql, vector.params)


def _within(scope: Predicate, label: str) -> Predicate:
    return scope if label == EVERYTHING else scope & partition_predicate(label)


def search_statement(
    scope: Predicate,
    queries: list[SearchQuery],
    columns: tuple[str, ...],
    nearest: list[tuple[str, int]],
    lexical: list[tuple[str, int]],
    scope_size: int = 0,
    ef_search: int | None = None,
    exact: bool = False,
) -> Statement:
    """One statement for every (scan, query): a k-nearest select per `nearest` (label, count) and one full-text
    select per query taking each `lexical` (label, count), label a search partition or EVERYTHING. Each query's
    vector and terms are carried once. The buckets' k-nearest scans are gated; "other"'s is not: its index holds
    only the few nodes outside every bucket, and no B-tree answers its condition at once. The HNSW scans walk at
    `ef_search` (default: OVSITE_HNSW_EF_SEARCH), set by the statement itself (`shared_vector`); with `exact`, the
    k-nearest selects sort every row of their scope instead (`exact_nearest`: a small tenant's), and the lexical
    side tests the scope's rows instead of listing the table's holders from the GIN index."""
    stop_words = bool(lexical) and scope_size >= STOP_WORDS_FROM
    ef_search = settings.HNSW_EF_SEARCH if ef_search is None else ef_search
    common, nearest_selects, lexical_selects = [], [], []
    for index, query in enumerate(queries):
        holder, read = shared_vector(f"query_{index}", query.vector, ef_search)
        common.append(holder)
        if lexical:  # hybrid and lexical: every row gets its coverage of the query's terms
            buckets = [label for label, _ in lexical]
            common += lexical_terms(
                index, query.text, scope, buckets, scope_size, stop_words, capped=bool(nearest), small_scope=exact
            )
            lexical_selects.append(lexical_select(index, read, columns, lexical))
        nearest_selects += [
            nearest_select(
                _within(scope, label),
                read,
                columns,
                count,
                label,
                index,
                gate=label not in (EVERYTHING, "other"),
                lexical=bool(lexical),
                exact=exact,
            )
            for label, count in nearest
        ]
    return Statement(nearest_selects, lexical_selects, tuple(common))


def fetch_statement(statement: Statement, prepare: bool = False, limit: int | None = None) -> list[dict]:
    """The statement in one round trip, rows as dicts. With `limit`, only the nearest `limit` rows of all the
    k-nearest selects come back (the full-text selects are already cut to their count). With `prepare`, the
    statement is bound server-side and prepared once it repeats (see `prepared_cursor`)."""
    if not statement.nearest and not statement.lexical:
        return []
    sql, params = statement_sql(statement, limit)
    # A read replica's in a search route, the primary's if it is lost under the read (core/replicas.py).
    with prepared_cursor() if prepare else read_cursor() as cursor:
        cursor.execute(sql, params)
        return _rows(cursor)


def statement_sql(statement: Statement, limit: int | None = None) -> tuple[str, list]:
    common = [part.sql for part in statement.common]
    params = [param for part in statement.common for param in part.params]
    parts = [select.sql for select in statement.nearest]
    params += [param for select in statement.nearest for param in select.params]
    if limit is not None and statement.nearest:
        # Materialized, so the rows are sorted here and not merged as if each scan's were in order: relaxed_order
        # scans return them only nearly so (pgvector's README).
        common.append(f"nearest AS MATERIALIZED ({' UNION ALL '.join(parts)})")
        parts = [f"(SELECT * FROM nearest ORDER BY distance, uri LIMIT {int(limit)})"]  # written in: see nearest_select
    parts += [select.sql for select in statement.lexical]
    params += [param for select in statement.lexical for param in select.params]
    with_sql = f"WITH {', '.join(common)} " if common else ""
    return with_sql + " UNION ALL ".join(parts), params


def _rows(cursor) -> list[dict]:
    names = [column.name for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def prepared_cursor():
    """A Django cursor over psycopg's server-side binding cursor, which prepares a statement text it has seen
    `prepare_threshold` times before on its connection (settings.DB_PREPARED_STATEMENTS; Django's own cursors bind
    client-side and never prepare). For a statement whose text repeats with new values, such as the per-bucket
    quota search, the plan is made once per connection instead of once per request. The same checks as
    `connection.cursor()`: health, thread sharing, query logging; on a read replica, the same fall back to the
    primary (`core.replicas.read_cursor`)."""
    return read_cursor(ServerBindingCursor)


def vector_text(vector) -> str:
    """pgvector's text form of a query vector. Nine significant digits give back every float32 exactly, and one
    format for the whole vector is about 5× faster than pgvector's float-by-float conversion, its text a third
    shorter for PostgreSQL to parse."""
    values = np.asarray(vector, dtype=np.float32).tolist()
    return "[" + _vector_format(len(values)) % tuple(values) + "]"


@cache
def _vector_format(dimensions: int) -> str:
    return ",".join(["%.9g"] * dimensions)
