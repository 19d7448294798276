from profiles.models import PurposeProfile, RetrievalSettings

# Read on every request, so a raw SELECT on the primary key / unique name: half the cost of composing and
# compiling the ORM query (bench/RESULTS.md, profile of /search), and still fresh for every worker.
_SETTINGS_SQL = f"SELECT * FROM {RetrievalSettings._meta.db_table} WHERE id = 1"
_PROFILE_SQL = f"SELECT * FROM {PurposeProfile._meta.db_table} WHERE name = %s AND enabled"


def current_settings() -> RetrievalSettings:
    """Read per request, so an operator's change applies to the next request in every worker."""
    settings_row = next(iter(RetrievalSettings.objects.raw(_SETTINGS_SQL)), None)
    return settings_row if settings_row is not None else RetrievalSettings(pk=1)


def purpose_profile(name: str) -> PurposeProfile | None:
    return next(iter(PurposeProfile.objects.raw(_PROFILE_SQL, [name])), None)


def enabled_purposes() -> list[str]:
    return list(PurposeProfile.objects.filter(enabled=True).order_by("name").values_list("name", flat=True))
