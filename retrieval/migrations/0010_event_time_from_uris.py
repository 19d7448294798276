"""Event memories written before their write path set `event_time` get it from their URI's day
(memories/events/YYYY/MM/DD/…), as retrieval.services.event_time reads it: the search ranks a newer statement of one
subject first and the block dates each memory by it (docs/retrieval.md, "Facts that change")."""

import datetime as dt
import re

from django.db import migrations

EVENT_DAY = re.compile(r"/memories/events/(\d{4})/(\d{2})/(\d{2})/")
BATCH = 2000


def backfill(apps, schema_editor):
    Context = apps.get_model("retrieval", "Context")
    rows = Context.objects.filter(
        kind="file", event_time__isnull=True, uri__regex=r"/memories/events/\d{4}/\d{2}/\d{2}/"
    )
    batch = []
    for row in rows.only("id", "uri").iterator(chunk_size=BATCH):
        try:
            row.event_time = dt.datetime(*map(int, EVENT_DAY.search(row.uri).groups()), tzinfo=dt.UTC)
        except ValueError:  # an impossible day: no date, as on the write path
            continue
        batch.append(row)
        if len(batch) == BATCH:
            Context.objects.bulk_update(batch, ["event_time"])
            batch = []
    Context.objects.bulk_update(batch, ["event_time"])


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0009_embedding_inline")]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
