"""The query vector's text form (retrieval.search.statements.vector_text) gives PostgreSQL back the exact float32
values."""

import numpy as np
import pytest
from django.db import connection
from pgvector import Vector

from retrieval.search.statements import vector_text


@pytest.mark.django_db
def test_vector_text_parses_to_the_same_vector_as_pgvectors_own():
    rng = np.random.default_rng(7)
    vectors = [rng.normal(0, 0.05, 512).astype(np.float32) for _ in range(20)]
    vectors += [np.array([1e-38, -3.4e38, 0.0, 1.0, -1.0, 1 / 3], dtype=np.float32)]
    with connection.cursor() as cursor:
        for vector in vectors:
            cursor.execute(
                "SELECT %s::vector = %s::vector, (%s::vector)::text",
                [vector_text(vector), Vector._to_db(vector), vector_text(vector)],
            )
            same, text = cursor.fetchone()
            assert same, text[:80]
            assert np.array_equal(np.array(text[1:-1].split(","), dtype=np.float32), vector)
