"""Per-process caches of the rows every request reads and only an operator changes: API keys and the accounts and
users they name (core/auth.py), the retrieval settings row and the purpose profiles (profiles/selectors.py).

An entry is kept for `OVSITE_CONFIG_CACHE_SECONDS` (1 s by default; 0 reads the database every time). A change
made through the ORM in this process (the admin's save, the key-management API and commands, `QuerySet.update`
and `delete`) clears the caches of its model at once and again when its transaction commits; every other process
sees it when its entry expires, so a revoked or deleted key is refused everywhere within that bound
(docs/operations.md, "API keys and the per-process cache"). A change written past the ORM (psql, a migration) is
seen within the bound too; so is an account deleted and made again under its name (its old id served meanwhile).
"""

import threading
import time

from django.conf import settings
from django.db import connections, models, router, transaction
from django.db.models.signals import post_delete, post_save

_MISSING = object()


class ConfigCache:
    """Values by key, each loaded from the database at most once per `OVSITE_CONFIG_CACHE_SECONDS` in this process.

    Nothing is cached inside a transaction: what it reads may be its own uncommitted write, which a rollback would
    leave behind in the cache. A load that a change overtook (cleared while it read) is returned but not kept."""

    def __init__(self, name: str, *, max_entries: int = 4096):
        self.name = name
        self.max_entries = max_entries  # a bound on memory: the entries are keys that exist, not what callers send
        self._entries: dict = {}
        self._generation = 0
        self._lock = threading.Lock()

    def get(self, key, load, *, keep_none: bool = True):
        """The value of `key`, from the cache or from `load()`; a None from `load` is kept only with `keep_none`."""
        ttl = settings.OVSITE_CONFIG_CACHE_SECONDS
        if ttl <= 0 or connections["default"].in_atomic_block:
            return load()
        now = time.monotonic()
        entry = self._entries.get(key, _MISSING)
        if entry is not _MISSING and entry[0] > now:
            return entry[1]
        generation = self._generation
        value = load()
        if value is None and not keep_none:
            return value
        with self._lock:
            if generation == self._generation:
                if len(self._entries) >= self.max_entries:
                    self._entries.clear()
                self._entries[key] = (now + ttl, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._generation += 1
            self._entries.clear()


_CACHES_BY_MODEL: dict[type, list[ConfigCache]] = {}


def watch(cache: ConfigCache, *watched: type[models.Model]) -> None:
    """`cache` is cleared whenever a row of one of `watched` is saved, deleted or bulk-changed in this process."""
    for model in watched:
        _CACHES_BY_MODEL.setdefault(model, []).append(cache)
        post_save.connect(_row_changed, sender=model, weak=False, dispatch_uid=f"config_cache:{model.__name__}:save")
        post_delete.connect(
            _row_changed, sender=model, weak=False, dispatch_uid=f"config_cache:{model.__name__}:delete"
        )


def changed(model: type[models.Model]) -> None:
    """Clears the caches of `model`'s rows now (this process's next read loads the change) and, inside a
    transaction, again at its commit (a read between the two would have loaded the row as it was)."""
    caches = _CACHES_BY_MODEL.get(model, ())
    for cache in caches:
        cache.clear()
    using = router.db_for_write(model)
    if caches and connections[using].in_atomic_block:
        transaction.on_commit(lambda: [cache.clear() for cache in caches], using=using)


def clear_all() -> None:
    """Every cache emptied: for a change made past the ORM in this process (a test's teardown by plain SQL)."""
    for caches in _CACHES_BY_MODEL.values():
        for cache in caches:
            cache.clear()


def _row_changed(sender, **kwargs) -> None:
    changed(sender)


class ConfigQuerySet(models.QuerySet):
    """A queryset whose bulk writes, which send no signals, clear the caches of its model's rows (a delete sends
    post_delete per row, which `watch` listens to)."""

    def update(self, **kwargs):
        rows = super().update(**kwargs)
        changed(self.model)
        return rows

    def bulk_update(self, objs, fields, batch_size=None):
        rows = super().bulk_update(objs, fields, batch_size=batch_size)
        changed(self.model)
        return rows

    def bulk_create(self, objs, *args, **kwargs):
        created = super().bulk_create(objs, *args, **kwargs)
        changed(self.model)
        return created
