from profiles.models import PurposeProfile, RetrievalSettings


def current_settings() -> RetrievalSettings:
    """Read per request, so an operator's change applies to the next request in every worker."""
    settings_row = RetrievalSettings.objects.filter(pk=1).first()
    return settings_row if settings_row is not None else RetrievalSettings(pk=1)


def purpose_profile(name: str) -> PurposeProfile | None:
    return PurposeProfile.objects.filter(name=name, enabled=True).first()


def enabled_purposes() -> list[str]:
    return list(PurposeProfile.objects.filter(enabled=True).order_by("name").values_list("name", flat=True))
