"""The lexical index of hybrid retrieval (docs/retrieval.md): `ovsite_lexical`, a generated tsvector of the three
levels, and its GIN index. PostgreSQL's text search parser leaves a run of Chinese, Japanese or Korean characters
whole, one lexeme per run; `ovsite_lexical` rewrites each run as its overlapping character pairs (a single character
stays as it is), the usual indexing of those scripts, and queries pass through the same function. IMMUTABLE, as a
generated column requires: it depends on its argument alone."""

import django.contrib.postgres.indexes
import django.contrib.postgres.search
import django.db.models.functions.text
from django.db import migrations, models

CJK_RUN = r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+"
LEXICAL_FUNCTION = f"""
CREATE FUNCTION ovsite_lexical(given text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT regexp_replace(given, '{CJK_RUN}', ' ', 'g') || ' ' || coalesce((
    SELECT string_agg(CASE WHEN length(run[1]) = 1 THEN run[1] ELSE (
        SELECT string_agg(substr(run[1], pair_start, 2), ' ') FROM generate_series(1, length(run[1]) - 1) AS pair_start
    ) END, ' ')
    FROM regexp_matches(given, '{CJK_RUN}', 'g') AS run), '')
$$
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ovsite", "0003_rate_limit_cache_table"),
        ("retrieval", "0007_search_partitions"),
    ]

    operations = [
        migrations.RunSQL(LEXICAL_FUNCTION, "DROP FUNCTION ovsite_lexical(text)"),
        migrations.AddField(
            model_name="context",
            name="lexemes",
            field=models.GeneratedField(
                db_persist=True,
                expression=django.contrib.postgres.search.CombinedSearchVector(
                    django.contrib.postgres.search.CombinedSearchVector(
                        django.contrib.postgres.search.SearchVector(
                            models.Func("abstract", function="ovsite_lexical", output_field=models.TextField()),
                            config="english",
                            weight="A",
                        ),
                        "||",
                        django.contrib.postgres.search.SearchVector(
                            models.Func("overview", function="ovsite_lexical", output_field=models.TextField()),
                            config="english",
                            weight="B",
                        ),
                        django.contrib.postgres.search.SearchConfig("english"),
                    ),
                    "||",
                    django.contrib.postgres.search.SearchVector(
                        models.Func(
                            models.Case(
                                models.When(kind="file", then=django.db.models.functions.text.Left("content", 100000)),
                                default=models.Value(""),
                            ),
                            function="ovsite_lexical",
                            output_field=models.TextField(),
                        ),
                        config="english",
                        weight="C",
                    ),
                    django.contrib.postgres.search.SearchConfig("english"),
                ),
                output_field=django.contrib.postgres.search.SearchVectorField(),
            ),
        ),
        migrations.AddIndex(
            model_name="context",
            index=django.contrib.postgres.indexes.GinIndex(fields=["lexemes"], name="context_lexemes_gin"),
        ),
    ]
