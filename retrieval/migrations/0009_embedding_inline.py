"""A node's embedding stays in its heap row (docs/retrieval.md, "HNSW: recall against speed").

pgvector's `vector` is stored EXTERNAL: a 512-dimension vector is 2 KB, so any row over PostgreSQL's 2 KB toast
threshold had its embedding moved out to the TOAST table, and every hit a search returned paid two more lookups
(the toast index and two chunks) to compute its distance in the select list. STORAGE MAIN makes the embedding the
last column to leave the row, and `toast_tuple_target` 8160 (a page less its header) lets a row keep it and its
short texts inline; long texts are still compressed and moved out first.

Rows written before this migration move inline when their embedding is next written (`manage.py reembed`), or all
at once with `VACUUM FULL retrieval_context`, which locks the table and rebuilds its indexes: the migration does
not rewrite a large store behind the operator's back."""

from django.db import migrations

INLINE = 'ALTER TABLE "retrieval_context" ALTER COLUMN "embedding" SET STORAGE MAIN, SET (toast_tuple_target = 8160)'
EXTERNAL = 'ALTER TABLE "retrieval_context" ALTER COLUMN "embedding" SET STORAGE EXTERNAL, RESET (toast_tuple_target)'


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0008_lexical_index")]

    operations = [migrations.RunSQL(INLINE, EXTERNAL)]
